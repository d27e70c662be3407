// flotilla-kube runs a real Kubernetes control plane for Flotilla's local stack and tests:
// embedded etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
// k8s.io/kubernetes, and kwok as the kubelet stand-in (fake nodes, the pod lifecycle).
//
// One binary, two roles. Run plainly it is the supervisor: it makes the PKI, starts etcd in
// its own process and every other part as a child process of the same binary
// (`flotilla-kube kube-apiserver …`), so each part keeps the global flags, feature gates and
// metrics registries it has in its own upstream binary. The supervisor prints one ready
// line when the API server answers /readyz and the fake nodes exist; Ctrl-C (or SIGTERM)
// stops every part, and a part that dies stops the rest (a half control plane is worse
// than none: tests would see a cluster that silently stops reconciling).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// components are the parts the supervisor starts as children of this binary.
var components = map[string]func() int{
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kwok":                    runKwok,
}

func main() {
	if len(os.Args) > 1 {
		if run, ok := components[os.Args[1]]; ok {
			// The component parses os.Args itself, as its own binary would.
			os.Args = append([]string{os.Args[0] + " " + os.Args[1]}, os.Args[2:]...)
			os.Exit(run())
		}
	}
	if err := supervise(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-kube:", err)
		os.Exit(1)
	}
}
