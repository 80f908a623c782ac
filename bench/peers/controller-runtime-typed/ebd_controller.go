package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ebdv1alpha1 "example.com/ebdman-cr-typed/api/v1alpha1"
	vfmac "example.com/ebdman-cr-typed/api/v1alpha1/applyconfiguration/api/v1alpha1"
	ebdv1beta1 "example.com/ebdman-cr-typed/api/v1beta1"
	ebdac "example.com/ebdman-cr-typed/api/v1beta1/applyconfiguration/api/v1beta1"
)

const (
	fieldManager = "ebdman"
	annPrefix    = "vfm-sim.ebdman.example.com/"
	managedBy    = "app.kubernetes.io/managed-by"
	ebdLabel     = "ebdman.example.com/ebd"

	condInstalled  = "Installed"
	condVFMHealthy = "VFMHealthy"
	condReady      = "Ready"
)

// EBDReconciler reconciles an EBD into a ConfigMap and a VFM.
type EBDReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller: EBDs, and the VFMs and
// ConfigMaps they own. With namespaces, only those namespaces' events
// reach the reconciler (a predicate: the caches still hold every
// namespace's objects).
func (r *EBDReconciler) SetupWithManager(mgr ctrl.Manager, workers int, namespaces []string) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&ebdv1beta1.EBD{}).
		Owns(&ebdv1alpha1.VFM{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("ebd")
	if len(namespaces) > 0 {
		b = b.WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return slices.Contains(namespaces, o.GetNamespace())
		}))
	}
	return b.Complete(r)
}

// The RBAC config/rbac/role.yaml grants (the EBD's finalizers: for
// blockOwnerDeletion on the children's controller references).
//
// +kubebuilder:rbac:groups=ebdman.example.com,resources=ebds,verbs=list;watch
// +kubebuilder:rbac:groups=ebdman.example.com,resources=ebds/status,verbs=patch
// +kubebuilder:rbac:groups=ebdman.example.com,resources=ebds/finalizers,verbs=update
// +kubebuilder:rbac:groups=ebdman.example.com,resources=vfms,verbs=create;get;list;patch;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create;get;list;patch;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies the EBD's children when the cached ones differ, then
// writes the conditions it owns when they changed.
func (r *EBDReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ebd ebdv1beta1.EBD
	if err := r.Get(ctx, req.NamespacedName, &ebd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ebd.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	gen := ebd.Generation
	anns := propagatedAnnotations(&ebd)
	labels := map[string]string{managedBy: "ebdman", ebdLabel: ebd.Name}
	owner := metav1ac.OwnerReference().
		WithAPIVersion(ebdv1beta1.GroupVersion.String()).WithKind("EBD").
		WithName(ebd.Name).WithUID(ebd.UID).
		WithController(true).WithBlockOwnerDeletion(true)

	// The ConfigMap <name>-config, data = spec.vfmTemplate.config.
	cmKey := types.NamespacedName{Namespace: ebd.Namespace, Name: ebd.Name + "-config"}
	var cm corev1.ConfigMap
	var failMsg string
	var err error
	if !(r.Get(ctx, cmKey, &cm) == nil && ownedBy(&cm, ebd.UID, anns) &&
		equality.Semantic.DeepEqual(cm.Data, ebd.Spec.VFMTemplate.Config)) {
		ac := corev1ac.ConfigMap(cmKey.Name, cmKey.Namespace).
			WithLabels(labels).WithAnnotations(anns).WithOwnerReferences(owner).
			WithData(ebd.Spec.VFMTemplate.Config)
		if _, failMsg, err = r.apply(ctx, ac, "ConfigMap", cmKey.Name); err != nil {
			return ctrl.Result{}, err
		}
	}

	// The VFM <name>, spec = spec.vfmTemplate. Applying a new spec makes the
	// cached VFM's Ready stale; applying only metadata (annotations) does not.
	var vfm ebdv1alpha1.VFM
	appliedSpec := false
	want := ebdv1alpha1.VFMSpec(ebd.Spec.VFMTemplate)
	haveVFM := r.Get(ctx, req.NamespacedName, &vfm) == nil
	sameSpec := haveVFM && equality.Semantic.DeepEqual(vfm.Spec, want)
	if failMsg == "" && !(haveVFM && ownedBy(&vfm, ebd.UID, anns) && sameSpec) {
		spec := vfmac.VFMSpec().WithImage(want.Image).WithConfig(want.Config)
		if want.Replicas != nil {
			spec.WithReplicas(*want.Replicas)
		}
		ac := vfmac.VFM(ebd.Name, ebd.Namespace).
			WithLabels(labels).WithAnnotations(anns).WithOwnerReferences(owner).
			WithSpec(spec)
		applied := false
		if applied, failMsg, err = r.apply(ctx, ac, "VFM", ebd.Name); err != nil {
			return ctrl.Result{}, err
		}
		appliedSpec = applied && !sameSpec
	}

	var seen *ebdv1alpha1.VFM
	if r.Get(ctx, req.NamespacedName, &vfm) == nil {
		seen = &vfm
	}
	installed := cond(condInstalled, metav1.ConditionTrue, "Installed", "configmap and vfm custom resource applied", gen)
	if failMsg != "" {
		installed = cond(condInstalled, metav1.ConditionFalse, "InstallFailed", failMsg, gen)
	}
	health := vfmHealth(seen, appliedSpec, gen)
	ready := cond(condReady, metav1.ConditionTrue, "Ready", "ebd is ready", gen)
	if installed.Status != metav1.ConditionTrue {
		ready = cond(condReady, metav1.ConditionFalse, installed.Reason, installed.Message, gen)
	} else if health.Status != metav1.ConditionTrue {
		ready = cond(condReady, metav1.ConditionFalse, health.Reason, health.Message, gen)
	}

	old := ebd.Status.Conditions
	conds := slices.Clone(old)
	changed := false
	for _, c := range []metav1.Condition{installed, health, ready} {
		changed = meta.SetStatusCondition(&conds, c) || changed
	}
	if !changed && ebd.Status.ObservedGeneration == gen {
		return ctrl.Result{}, nil
	}
	// Status SSA with only the conditions this manager owns.
	status := ebdac.EBDStatus().WithObservedGeneration(gen)
	for _, t := range []string{condInstalled, condVFMHealthy, condReady} {
		c := meta.FindStatusCondition(conds, t)
		status.WithConditions(metav1ac.Condition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	if err := r.Status().Apply(ctx, ebdac.EBD(ebd.Name, ebd.Namespace).WithStatus(status),
		client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, err
	}
	r.transitions(&ebd, old, installed, ready)
	return ctrl.Result{}, nil
}

// propagatedAnnotations: the EBD's annotations the children carry.
func propagatedAnnotations(ebd *ebdv1beta1.EBD) map[string]string {
	var anns map[string]string
	for k, v := range ebd.Annotations {
		if strings.HasPrefix(k, annPrefix) {
			if anns == nil {
				anns = map[string]string{}
			}
			anns[k] = v
		}
	}
	return anns
}

// ownedBy: the cached child has the EBD (uid) as controller and exactly the
// propagated annotations anns among its vfm-sim ones.
func ownedBy(have client.Object, uid types.UID, anns map[string]string) bool {
	owner := metav1.GetControllerOf(have)
	if owner == nil || owner.UID != uid {
		return false
	}
	ha := have.GetAnnotations()
	for k, v := range anns {
		if ha[k] != v {
			return false
		}
	}
	for k := range ha {
		if _, ok := anns[k]; strings.HasPrefix(k, annPrefix) && !ok {
			return false
		}
	}
	return true
}

func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err)
}

// apply applies one child: (applied, failedMessage, transientErr).
func (r *EBDReconciler) apply(ctx context.Context, ac runtime.ApplyConfiguration, kind, name string) (bool, string, error) {
	err := r.Apply(ctx, ac, client.FieldOwner(fieldManager), client.ForceOwnership)
	switch {
	case err == nil:
		return true, "", nil
	case permanent(err):
		return false, fmt.Sprintf("%s %s: %v", kind, name, err), nil
	}
	return false, "", err
}

func cond(t string, status metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
}

// vfmHealth mirrors operator/ebdman/conditions.c.
func vfmHealth(vfm *ebdv1alpha1.VFM, appliedNewSpec bool, gen int64) metav1.Condition {
	progressing := cond(condVFMHealthy, metav1.ConditionFalse, "Progressing", "vfm custom resource is not ready", gen)
	if vfm == nil || appliedNewSpec {
		return progressing
	}
	ready := meta.FindStatusCondition(vfm.Status.Conditions, "Ready")
	switch {
	case ready == nil:
		return progressing
	case ready.ObservedGeneration != 0 && ready.ObservedGeneration < vfm.Generation:
		return progressing
	case ready.Status == metav1.ConditionTrue:
		return cond(condVFMHealthy, metav1.ConditionTrue, "Ready", "vfm custom resource is ready", gen)
	case ready.Status == metav1.ConditionFalse && ready.Reason == "Failed":
		msg := ready.Message
		if msg == "" {
			msg = "vfm custom resource failed"
		}
		return cond(condVFMHealthy, metav1.ConditionFalse, "Error", msg, gen)
	}
	return progressing
}

// transitions records the events ebdman records on condition transitions.
func (r *EBDReconciler) transitions(ebd *ebdv1beta1.EBD, old []metav1.Condition, inst, ready metav1.Condition) {
	oi, or := meta.FindStatusCondition(old, condInstalled), meta.FindStatusCondition(old, condReady)
	if inst.Status == metav1.ConditionTrue && (oi == nil || oi.Status != metav1.ConditionTrue) {
		r.Recorder.Eventf(ebd, nil, corev1.EventTypeNormal, "Installed", "Install", "configmap and vfm custom resource applied")
	}
	if inst.Status == metav1.ConditionFalse && (oi == nil || oi.Status != metav1.ConditionFalse || oi.Message != inst.Message) {
		r.Recorder.Eventf(ebd, nil, corev1.EventTypeWarning, "InstallFailed", "Install", "%s", inst.Message)
	}
	if ready.Status == metav1.ConditionTrue && (or == nil || or.Status != metav1.ConditionTrue) {
		r.Recorder.Eventf(ebd, nil, corev1.EventTypeNormal, "BecameReady", "Reconcile", "ebd is ready")
	}
	if or != nil && or.Status == metav1.ConditionTrue && ready.Status != metav1.ConditionTrue {
		r.Recorder.Eventf(ebd, nil, corev1.EventTypeWarning, "BecameUnready", "Reconcile", "%s: %s", ready.Reason, ready.Message)
	}
}
