// ebdman-cr-typed: the ebdman operator written with
// sigs.k8s.io/controller-runtime the way kubebuilder users write it, as a
// peer for bench/ebd_bench.sh (--operator-bin). Go types for EBD v1beta1
// (api/v1beta1) and VFM v1alpha1 (api/v1alpha1), with controller-gen's
// DeepCopy methods and apply configurations, registered in the manager's
// scheme; the same contract as operator/ebdman and as the unstructured peer
// (../controller-runtime):
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
// Typed objects read from the informers' cache (controller-runtime's
// default for typed objects), applied through client.Apply with typed apply
// configurations (client-go's for the ConfigMap, controller-gen's for the
// VFM and the EBD's status). The caches strip managedFields (like libkcr's
// informer); ConfigMaps are watched with the managed-by label selector only.
//
//	ebdman-cr-typed run [--workers N] [--metrics-bind-address ADDR]
//	                    [--health-probe-bind-address ADDR] [--zap-log-level L] [--kubeconfig P]
//	                    [--namespace NS]... [--reconcile-namespace NS]...
//	ebdman-cr-typed webhook ...   (webhook.go: only the validating webhook)
//
// The last two flags of run are not part of the contract
// (bench/cluster_size.sh, bench/README.md section 9): --namespace NS
// (repeatable) restricts every cache to those namespaces
// (cache.Options.DefaultNamespaces: the apiserver filters);
// --reconcile-namespace NS (repeatable) keeps the caches cluster-wide,
// controller-runtime's default, and drops the events of other namespaces
// with a predicate (the client filters). Without them the peer watches and
// reconciles every namespace.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ebdv1alpha1 "example.com/ebdman-cr-typed/api/v1alpha1"
	ebdv1beta1 "example.com/ebdman-cr-typed/api/v1beta1"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(ebdv1alpha1.AddToScheme(scheme)) // VFM
	utilruntime.Must(ebdv1beta1.AddToScheme(scheme))  // EBD
}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "webhook" {
		runWebhook(args[1:])
		return
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("ebdman-cr-typed run", flag.ExitOnError)
	workers := fs.Int("workers", 4, "concurrent reconciles")
	metricsAddr := fs.String("metrics-bind-address", ":8080", "metrics address, 0 disables")
	healthAddr := fs.String("health-probe-bind-address", ":8081", "health probe address")
	logLevel := fs.String("zap-log-level", "info", "debug, info, warn, error")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, in-cluster)")
	var namespaces, reconcileNamespaces stringList
	fs.Var(&namespaces, "namespace", "cache (and so reconcile) only this namespace; repeat it for several (default: all)")
	fs.Var(&reconcileNamespaces, "reconcile-namespace",
		"reconcile only EBDs in this namespace, caches still cluster-wide; repeat it for several (default: all)")
	_ = fs.Parse(args)

	lvl := map[string]uzap.Level{"debug": uzap.DebugLevel, "info": uzap.InfoLevel,
		"warn": uzap.WarnLevel, "error": uzap.ErrorLevel}[*logLevel]
	ctrl.SetLogger(zap.New(zap.Level(lvl)))
	log := ctrl.Log.WithName("ebdman-cr-typed")

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
	cacheOpts := cacheOptions()
	if len(namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *healthAddr,
		Cache:                  cacheOpts,
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
	r := &EBDReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("ebdman.example.com/ebdman")}
	if err := r.SetupWithManager(mgr, *workers, reconcileNamespaces); err != nil {
		fail(log, err, "creating the controller")
	}
	log.Info("ebdman-cr-typed starting", "workers", *workers, "namespaces", namespaces,
		"reconcileNamespaces", reconcileNamespaces)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(log, err, "running the manager")
	}
}

// cacheOptions: what both modes cache - managedFields stripped (as libkcr's
// informer does), ConfigMaps only with ebdman's managed-by label.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{managedBy: "ebdman"})},
		},
	}
}

// stringList: a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func fail(log logr.Logger, err error, what string) {
	log.Error(err, what)
	os.Exit(1)
}
