// Package v1alpha1 contains the API Schema definitions for the
// ebdman.example.com v1alpha1 API group that this peer uses: VFM (the EBD
// is v1beta1, in ../v1beta1; its spec.vfmTemplate has VFMSpec's fields).
// Written the kubebuilder way: Go types with markers, from which
// controller-gen generates the DeepCopy methods (zz_generated.deepcopy.go)
// and the apply configurations (applyconfiguration/). The CRDs themselves
// are the repository's config/crd/bases; these types follow them.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=ebdman.example.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "ebdman.example.com", Version: "v1alpha1"}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// SchemeGroupVersion is GroupVersion under the name the generated apply
	// configurations (applyconfiguration/utils.go) refer to.
	SchemeGroupVersion = GroupVersion

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
