// ebdman-cr: the ebdman operator written with sigs.k8s.io/controller-runtime,
// as a peer for bench/ebd_bench.sh (--operator controller-runtime). Same
// contract as operator/ebdman:
//
//   - for each EBD, server-side apply (field manager "ebdman", force) of a
//     ConfigMap <name>-config (data = spec.vfmTemplate.config) and a VFM
//     <name> (spec = spec.vfmTemplate), both labelled
//     app.kubernetes.io/managed-by=ebdman and ebdman.example.com/ebd=<name>,
//     carrying the EBD's vfm-sim.ebdman.example.com/* annotations and a
//     controller ownerReference; a child is applied only when the cached one
//     differs;
//   - conditions Installed, VFMHealthy, Ready with observedGeneration, set
//     with meta.SetStatusCondition, written by a status SSA of only the
//     conditions it owns plus status.observedGeneration, and only when
//     something changed;
//   - events Installed / InstallFailed / BecameReady / BecameUnready on
//     transitions (events.k8s.io, like ebdman's recorder).
//
// EBDs are read and written as ebdman.example.com/v1beta1 (the CRD's
// storage version), VFMs as v1alpha1. Unstructured objects throughout (no
// codegen), read from the informers' cache (client.CacheOptions.Unstructured:
// without it every Get of an unstructured object is a GET to the API
// server). The caches strip managedFields (like libkcr's informer);
// ConfigMaps are watched with the managed-by label selector only.
//
//	ebdman-cr run [--workers N] [--metrics-bind-address ADDR]
//	              [--health-probe-bind-address ADDR] [--zap-log-level L] [--kubeconfig P]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	group        = "ebdman.example.com"
	apiVersion   = group + "/v1beta1" // the EBD's (the owner references'); VFMs stay v1alpha1
	fieldManager = "ebdman"
	annPrefix    = "vfm-sim.ebdman.example.com/"
	managedBy    = "app.kubernetes.io/managed-by"
)

var (
	ebdGVK = schema.GroupVersionKind{Group: group, Version: "v1beta1", Kind: "EBD"}
	vfmGVK = schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "VFM"}
	cmGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

func newU(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

type reconciler struct {
	c   client.Client
	rec events.EventRecorder
}

// child builds the common part of a child: metadata with labels, propagated
// annotations and the controller ownerReference.
func child(ebd *unstructured.Unstructured, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	u := newU(gvk)
	u.SetName(name)
	u.SetNamespace(ebd.GetNamespace())
	u.SetLabels(map[string]string{managedBy: "ebdman", group + "/ebd": ebd.GetName()})
	ann := map[string]string{}
	for k, v := range ebd.GetAnnotations() {
		if strings.HasPrefix(k, annPrefix) {
			ann[k] = v
		}
	}
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	t := true
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: apiVersion, Kind: "EBD", Name: ebd.GetName(), UID: ebd.GetUID(),
		Controller: &t, BlockOwnerDeletion: &t,
	}})
	return u
}

func emptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return v == nil || (ok && len(m) == 0)
}

// upToDate: (the cached child has the wanted field, propagated annotations
// and controller owner; it has the wanted field).
func (r *reconciler) upToDate(ctx context.Context, want *unstructured.Unstructured, field string) (bool, bool) {
	have := newU(want.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return false, false
	}
	a, b := want.Object[field], have.Object[field]
	if !(emptyMap(a) && emptyMap(b)) && !reflect.DeepEqual(a, b) {
		return false, false
	}
	owner := metav1.GetControllerOf(have)
	if owner == nil || owner.UID != want.GetOwnerReferences()[0].UID {
		return false, true
	}
	wa, ha := want.GetAnnotations(), have.GetAnnotations()
	for k, v := range wa {
		if ha[k] != v {
			return false, true
		}
	}
	for k := range ha {
		if _, ok := wa[k]; strings.HasPrefix(k, annPrefix) && !ok {
			return false, true
		}
	}
	return true, true
}

func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err)
}

// install applies one child if needed: (applied a new field, failedMessage,
// transientErr). An apply of metadata only (annotations, owner) leaves the
// child's field, and so the cached child's status, as it was.
func (r *reconciler) install(ctx context.Context, want *unstructured.Unstructured, field string) (bool, string, error) {
	current, sameField := r.upToDate(ctx, want, field)
	if current {
		return false, "", nil
	}
	err := r.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(want),
		client.FieldOwner(fieldManager), client.ForceOwnership)
	if err == nil {
		return !sameField, "", nil
	}
	if permanent(err) {
		return false, fmt.Sprintf("%s %s: %v", want.GetKind(), want.GetName(), err), nil
	}
	return false, "", err
}

func cond(t, status, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason,
		Message: msg, ObservedGeneration: gen}
}

// vfmHealth mirrors operator/ebdman/conditions.c.
func vfmHealth(vfm *unstructured.Unstructured, appliedNewSpec bool, gen int64) metav1.Condition {
	progressing := cond("VFMHealthy", "False", "Progressing", "vfm custom resource is not ready", gen)
	if vfm == nil || appliedNewSpec {
		return progressing
	}
	ready := meta.FindStatusCondition(conditionsOf(vfm), "Ready")
	switch {
	case ready == nil:
		return progressing
	case ready.ObservedGeneration != 0 && ready.ObservedGeneration < vfm.GetGeneration():
		return progressing
	case ready.Status == metav1.ConditionTrue:
		return cond("VFMHealthy", "True", "Ready", "vfm custom resource is ready", gen)
	case ready.Status == metav1.ConditionFalse && ready.Reason == "Failed":
		msg := ready.Message
		if msg == "" {
			msg = "vfm custom resource failed"
		}
		return cond("VFMHealthy", "False", "Error", msg, gen)
	}
	return progressing
}

func conditionsOf(u *unstructured.Unstructured) []metav1.Condition {
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		for _, item := range raw {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			var c metav1.Condition
			if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
				conds = append(conds, c)
			}
		}
	}
	return conds
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ebd := newU(ebdGVK)
	if err := r.c.Get(ctx, req.NamespacedName, ebd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ebd.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	gen := ebd.GetGeneration()
	spec, _, _ := unstructured.NestedMap(ebd.Object, "spec", "vfmTemplate")
	cfg, _, _ := unstructured.NestedMap(ebd.Object, "spec", "vfmTemplate", "config")

	cm := child(ebd, cmGVK, ebd.GetName()+"-config")
	if cfg == nil {
		cfg = map[string]any{}
	}
	cm.Object["data"] = cfg
	vfm := child(ebd, vfmGVK, ebd.GetName())
	if spec == nil {
		spec = map[string]any{}
	}
	vfm.Object["spec"] = spec

	_, failMsg, err := r.install(ctx, cm, "data")
	if err != nil {
		return ctrl.Result{}, err
	}
	appliedSpec := false
	if failMsg == "" {
		if appliedSpec, failMsg, err = r.install(ctx, vfm, "spec"); err != nil {
			return ctrl.Result{}, err
		}
	}

	var seen *unstructured.Unstructured
	if v := newU(vfmGVK); r.c.Get(ctx, req.NamespacedName, v) == nil {
		seen = v
	}
	installed := cond("Installed", "True", "Installed", "configmap and vfm custom resource applied", gen)
	if failMsg != "" {
		installed = cond("Installed", "False", "InstallFailed", failMsg, gen)
	}
	health := vfmHealth(seen, appliedSpec, gen)
	ready := cond("Ready", "True", "Ready", "ebd is ready", gen)
	if installed.Status != metav1.ConditionTrue {
		ready = cond("Ready", "False", installed.Reason, installed.Message, gen)
	} else if health.Status != metav1.ConditionTrue {
		ready = cond("Ready", "False", health.Reason, health.Message, gen)
	}

	old := conditionsOf(ebd)
	conds := append([]metav1.Condition(nil), old...)
	changed := false
	for _, c := range []metav1.Condition{installed, health, ready} {
		changed = meta.SetStatusCondition(&conds, c) || changed
	}
	og, _, _ := unstructured.NestedInt64(ebd.Object, "status", "observedGeneration")
	if !changed && og == gen {
		return ctrl.Result{}, nil
	}
	// Status SSA with only the conditions this manager owns.
	owned := []any{}
	for _, t := range []string{"Installed", "VFMHealthy", "Ready"} {
		c := meta.FindStatusCondition(conds, t)
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
		owned = append(owned, m)
	}
	st := newU(ebdGVK)
	st.SetName(ebd.GetName())
	st.SetNamespace(ebd.GetNamespace())
	st.Object["status"] = map[string]any{"observedGeneration": gen, "conditions": owned}
	if err := r.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(st),
		client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, err
	}
	r.transitions(ebd, old, installed, ready)
	return ctrl.Result{}, nil
}

func (r *reconciler) transitions(ebd *unstructured.Unstructured, old []metav1.Condition, inst, ready metav1.Condition) {
	oi, or := meta.FindStatusCondition(old, "Installed"), meta.FindStatusCondition(old, "Ready")
	if inst.Status == metav1.ConditionTrue && (oi == nil || oi.Status != metav1.ConditionTrue) {
		r.rec.Eventf(ebd, nil, "Normal", "Installed", "Install", "configmap and vfm custom resource applied")
	}
	if inst.Status == metav1.ConditionFalse && (oi == nil || oi.Status != metav1.ConditionFalse || oi.Message != inst.Message) {
		r.rec.Eventf(ebd, nil, "Warning", "InstallFailed", "Install", "%s", inst.Message)
	}
	if ready.Status == metav1.ConditionTrue && (or == nil || or.Status != metav1.ConditionTrue) {
		r.rec.Eventf(ebd, nil, "Normal", "BecameReady", "Reconcile", "ebd is ready")
	}
	if or != nil && or.Status == metav1.ConditionTrue && ready.Status != metav1.ConditionTrue {
		r.rec.Eventf(ebd, nil, "Warning", "BecameUnready", "Reconcile", "%s: %s", ready.Reason, ready.Message)
	}
}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("ebdman-cr run", flag.ExitOnError)
	workers := fs.Int("workers", 4, "concurrent reconciles")
	metricsAddr := fs.String("metrics-bind-address", ":8080", "metrics address, 0 disables")
	healthAddr := fs.String("health-probe-bind-address", ":8081", "health probe address")
	logLevel := fs.String("zap-log-level", "info", "debug, info, warn, error")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, in-cluster)")
	_ = fs.Parse(args)

	lvl := map[string]uzap.Level{"debug": uzap.DebugLevel, "info": uzap.InfoLevel,
		"warn": uzap.WarnLevel, "error": uzap.ErrorLevel}[*logLevel]
	ctrl.SetLogger(zap.New(zap.Level(lvl)))
	log := ctrl.Log.WithName("ebdman-cr")

	cfg, err := ctrl.GetConfig()
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err == nil {
			cfg.QPS = -1 // as ctrl.GetConfig: no client-side rate limit
		}
	}
	if err != nil {
		fail(log, err, "loading the kubeconfig")
	}
	strip := cache.TransformStripManagedFields()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *healthAddr,
		// Reads of unstructured objects go to the API server unless asked
		// otherwise: serve them from the informers' cache, like ebdman.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache: cache.Options{
			DefaultTransform: strip,
			ByObject: map[client.Object]cache.ByObject{
				newU(cmGVK): {Label: labels.SelectorFromSet(labels.Set{managedBy: "ebdman"})},
			},
		},
	})
	if err != nil {
		fail(log, err, "creating the manager")
	}
	_ = mgr.AddHealthzCheck("ping", healthz.Ping)
	_ = mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informers not synced")
		}
		return nil
	})
	r := &reconciler{c: mgr.GetClient(), rec: mgr.GetEventRecorder("ebdman.example.com/ebdman")}
	err = ctrl.NewControllerManagedBy(mgr).
		For(newU(ebdGVK)).
		Owns(newU(vfmGVK)).
		Owns(newU(cmGVK)).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Named("ebd").
		Complete(r)
	if err != nil {
		fail(log, err, "creating the controller")
	}
	log.Info("ebdman-cr starting", "workers", *workers)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(log, err, "running the manager")
	}
}

func fail(log logr.Logger, err error, what string) {
	log.Error(err, what)
	os.Exit(1)
}
