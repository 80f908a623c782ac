// The webhook peer of bench/webhook_cache_bench.sh: `ebdman-cr-typed
// webhook` serves the validating webhook of operator/ebdman/webhooks.c the
// way a kubebuilder user writes it with controller-runtime's webhook
// package - the typed EBD decoded by admission.Decoder, its children looked
// up in the manager's informer cache (typed, managedFields stripped,
// ConfigMaps by the managed-by label) - and nothing else: no controller.
//
//	ebdman-cr-typed webhook --port P --cert-dir DIR [--metrics-bind-address ADDR] [--kubeconfig P]
//
// Same decisions as ebdman's: on CREATE, a VFM <name> or ConfigMap
// <name>-config whose controller is not an EBD denies (403) the request; one
// controlled by another EBD is a warning; other operations are allowed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ebdv1alpha1 "example.com/ebdman-cr-typed/api/v1alpha1"
	ebdv1beta1 "example.com/ebdman-cr-typed/api/v1beta1"
)

type ebdValidator struct {
	c   client.Reader
	dec admission.Decoder
}

func (v *ebdValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	ebd := &ebdv1beta1.EBD{}
	if err := v.dec.Decode(req, ebd); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var warnings []string
	for _, ch := range []struct {
		obj        client.Object
		kind, name string
	}{
		{&ebdv1alpha1.VFM{}, "VFM", ebd.Name},
		{&corev1.ConfigMap{}, "ConfigMap", ebd.Name + "-config"},
	} {
		err := v.c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: ch.name}, ch.obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		ref := metav1.GetControllerOf(ch.obj)
		if ref != nil && ref.Kind == "EBD" && strings.HasPrefix(ref.APIVersion, "ebdman.example.com/") {
			if ref.UID != ebd.UID {
				warnings = append(warnings, fmt.Sprintf("%s %s/%s still belongs to a deleted EBD of this name",
					ch.kind, req.Namespace, ch.name))
			}
			continue
		}
		return admission.Denied(fmt.Sprintf("%s %s/%s exists and is not this EBD's", ch.kind, req.Namespace, ch.name))
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

func runWebhook(args []string) {
	fs := flag.NewFlagSet("ebdman-cr-typed webhook", flag.ExitOnError)
	port := fs.Int("port", 9443, "the webhook server's port (on 127.0.0.1)")
	certDir := fs.String("cert-dir", "", "the directory with tls.crt and tls.key")
	metricsAddr := fs.String("metrics-bind-address", "0", "metrics address, 0 disables")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, in-cluster)")
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("ebdman-cr-typed-webhook")

	cfg, err := ctrl.GetConfig()
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	}
	if err != nil {
		fail(log, err, "loading the kubeconfig")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: *port, CertDir: *certDir}),
		Cache:                  cacheOptions(),
	})
	if err != nil {
		fail(log, err, "creating the manager")
	}
	ctx := ctrl.SetupSignalHandler()
	for _, o := range []client.Object{&ebdv1alpha1.VFM{}, &corev1.ConfigMap{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
			fail(log, err, "making the informers")
		}
	}
	mgr.GetWebhookServer().Register("/validate-ebdman-example-com-v1beta1-ebd",
		&webhook.Admission{Handler: &ebdValidator{c: mgr.GetClient(), dec: admission.NewDecoder(scheme)}})
	log.Info("ebdman-cr-typed webhook starting", "port", *port)
	if err := mgr.Start(ctx); err != nil {
		fail(log, err, "running the manager")
	}
}
