// hello: examples/hello.c written with controller-runtime, as a kubebuilder
// user writes it (typed corev1.ConfigMap, an apply configuration, the
// manager's cached client), so that the two reconcilers can be counted
// side by side (bench/loc/count, bench/README.md section 6). Same
// behaviour: greet every ConfigMap labelled hello.kcr.io/greet=true by the
// name its hello.kcr.io/name label gives (else its own), record the
// replica and how many ConfigMaps greet that name, re-count a name's group
// when one of them changes. Not a benchmark peer: it is built
// (bench/peers/hello-go/build) so that it is known to compile, never run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const nameLabel = "hello.kcr.io/name"

type helloReconciler struct {
	client.Client
	identity string
}

// The ConfigMaps that greet name (from the cache).
func (r *helloReconciler) sameName(ctx context.Context, name string) ([]corev1.ConfigMap, error) {
	var same corev1.ConfigMapList
	err := r.List(ctx, &same, client.MatchingLabels{nameLabel: name})
	return same.Items, err
}

// Every ConfigMap that greets the same name as o.
func (r *helloReconciler) mapSameName(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[nameLabel]
	if name == "" {
		return nil
	}
	same, err := r.sameName(ctx, name)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(same))
	for i := range same {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&same[i])})
	}
	return reqs
}

func (r *helloReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name, count := cm.Labels[nameLabel], "1"
	if name != "" {
		same, err := r.sameName(ctx, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		count = strconv.Itoa(len(same))
	} else {
		name = req.Name
	}
	want := fmt.Sprintf("Hello, %s!", name)
	if cm.Data["greeting"] == want && cm.Data["greeted"] == count {
		return ctrl.Result{}, nil
	}
	apply := corev1ac.ConfigMap(req.Name, req.Namespace).WithData(map[string]string{
		"greeted": count, "greeter": r.identity, "greeting": want})
	err := r.Apply(ctx, apply, client.FieldOwner("hello"), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err): // deleted meanwhile
		return ctrl.Result{}, nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return ctrl.Result{}, nil
	case apierrors.IsInvalid(err):
		log.FromContext(ctx).Error(err, "greeting refused by validation; not retrying")
		return ctrl.Result{}, reconcile.TerminalError(err)
	case err != nil:
		log.FromContext(ctx).Error(err, "apply failed")
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("greeted")
	return ctrl.Result{}, nil
}

func main() {
	var ns, identity string
	var elect bool
	flag.StringVar(&ns, "namespace", "", "watch one namespace (default: all)")
	flag.StringVar(&identity, "identity", "", "this replica's name")
	flag.BoolVar(&elect, "leader-elect", false, "elect a leader")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	sel := labels.SelectorFromSet(labels.Set{"hello.kcr.io/greet": "true"})
	co := cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: sel}}}
	if ns != "" {
		co.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Cache: co, LeaderElection: elect, LeaderElectionID: "hello"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(2)
	}
	r := &helloReconciler{Client: mgr.GetClient(), identity: identity}
	err = ctrl.NewControllerManagedBy(mgr).Named("hello").For(&corev1.ConfigMap{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.mapSameName)).
		Complete(r)
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}
