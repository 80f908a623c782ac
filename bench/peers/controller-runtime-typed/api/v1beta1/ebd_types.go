package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EBDSpec is the desired state of an EBD.
type EBDSpec struct {
	// vfmTemplate is the spec of the VFM custom resource ebdman installs for
	// this EBD (spec.vfm in v1alpha1).
	// +required
	VFMTemplate VFMTemplateSpec `json:"vfmTemplate"`
}

// VFMTemplateSpec is the spec of the VFM an EBD asks for. Its fields are
// those of v1alpha1.VFMSpec, in the same order, so that a VFMTemplateSpec
// converts to a VFMSpec (ebdv1alpha1.VFMSpec(t)).
type VFMTemplateSpec struct {
	// config is passed to the VFM as key/value pairs (ebdman renders it into a
	// ConfigMap owned by the EBD).
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// image is the VFM container image (an image reference, so no whitespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +required
	Image string `json:"image"`

	// replicas is the number of VFM instances.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
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
// +kubebuilder:storageversion
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
