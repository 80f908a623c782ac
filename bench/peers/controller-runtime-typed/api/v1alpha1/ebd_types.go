package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EBDSpec is the desired state of an EBD.
type EBDSpec struct {
	// vfm describes the VFM custom resource ebdman installs for this EBD.
	// +required
	VFM VFMSpec `json:"vfm"`
}

// EBDStatus is the observed state of an EBD; written only by ebdman, through
// the status subresource.
type EBDStatus struct {
	// conditions are the latest observations of the object's state, one per
	// type (Ready is the summary). Each condition is owned separately under
	// server-side apply (list-type map keyed by type).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation of the spec that this
	// status describes. When it equals metadata.generation the status is
	// fresh.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// EBD is the Schema for the ebds API. ebdman installs and watches one VFM per
// EBD and summarises its health in status.conditions.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ebd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="VFM",type=string,JSONPath=`.status.conditions[?(@.type=="VFMHealthy")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EBD struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EBDSpec `json:"spec"`
	// +optional
	Status EBDStatus `json:"status,omitempty"`
}

// EBDList contains a list of EBD.
//
// +kubebuilder:object:root=true
type EBDList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EBD `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EBD{}, &EBDList{})
}
