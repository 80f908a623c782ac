// Command kstatus prints what sigs.k8s.io/cli-utils/pkg/kstatus - the library
// Flux, kpt and cli-utils compute an object's health with - makes of each
// Kubernetes object it reads: one line per object,
//
//	<kind>/<namespace>/<name><TAB><status><TAB><message>
//
// where status is Current, InProgress, Failed, Terminating or Unknown. Input on
// stdin is JSON: one object, a List (`kubectl get -o json`), or several of
// either one after another. Used by tests/e2e to check ebdman's conditions
// with the real library rather than a copy of its rules. Exits 1 when the
// input cannot be read or kstatus refuses an object. Built by
// tools/controlplane/build next to kubectl.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kubectl get ... -o json | kstatus")
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	dec := json.NewDecoder(os.Stdin)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			fail(out, "reading JSON: %v", err)
		}
		// As client-go decodes objects (int64 numbers, Lists).
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
		if err != nil {
			fail(out, "decoding an object: %v", err)
		}
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			print(out, o)
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				print(out, &o.Items[i])
			}
		}
	}
}

func print(out *bufio.Writer, u *unstructured.Unstructured) {
	res, err := status.Compute(u)
	if err != nil {
		fail(out, "%s/%s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	msg := strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(res.Message)
	fmt.Fprintf(out, "%s/%s/%s\t%s\t%s\n", u.GetKind(), u.GetNamespace(), u.GetName(),
		res.Status, msg)
}

func fail(out *bufio.Writer, format string, args ...interface{}) {
	out.Flush()
	fmt.Fprintf(os.Stderr, "kstatus: "+format+"\n", args...)
	os.Exit(1)
}
