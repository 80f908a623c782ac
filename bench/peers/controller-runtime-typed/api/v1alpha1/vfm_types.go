package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VFMSpec is the desired state of a VFM (copied from the owning EBD's
// spec.vfmTemplate).
type VFMSpec struct {
	// config holds the VFM's key/value configuration.
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

// VFMStatus is the observed state of a VFM; written by the VFM's own
// controller through the status subresource.
type VFMStatus struct {
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

// VFM is the Schema for the vfms API. VFMs are created by ebdman on behalf of
// an EBD and report their health in status.conditions.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VFM struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec VFMSpec `json:"spec,omitempty"`
	// +optional
	Status VFMStatus `json:"status,omitempty"`
}

// VFMList contains a list of VFM.
//
// +kubebuilder:object:root=true
type VFMList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VFM `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VFM{}, &VFMList{})
}
