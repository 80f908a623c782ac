// Package v1beta1 contains the API Schema definitions for the
// ebdman.example.com v1beta1 API group: EBD, in the CRD's storage version,
// the one every client uses. It differs from v1alpha1's EBD only in the
// name of spec.vfm, spec.vfmTemplate here. This peer has no v1alpha1 EBD
// type: it reads and writes EBDs as v1beta1 only and serves no conversion.
// The VFM kind stays v1alpha1 (../v1alpha1); spec.vfmTemplate
// (VFMTemplateSpec) has the fields of its VFMSpec. Written the kubebuilder
// way: Go types with markers, from which controller-gen generates the
// DeepCopy methods (zz_generated.deepcopy.go) and the apply configurations
// (applyconfiguration/). The CRDs themselves are the repository's
// config/crd/bases; these types follow them.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=ebdman.example.com
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "ebdman.example.com", Version: "v1beta1"}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// SchemeGroupVersion is GroupVersion under the name the generated apply
	// configurations (applyconfiguration/utils.go) refer to.
	SchemeGroupVersion = GroupVersion

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
