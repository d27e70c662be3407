package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok is kwok's own main: the kubelet stand-in that moves fake nodes and pods through
// the stages of kwokStages.
func runKwok() int {
	// The Kubernetes packages linked beside kwok register global flags (--version among them,
	// of a type kwok's cobra command cannot take over); kwok's own binary has none of them.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

// imagePullBackOffStage keeps a pod whose image matches the failing pattern Pending, its
// containers waiting in ImagePullBackOff: what a kubelet reports for an image that cannot be
// pulled, and the emulator's rule for the same pattern.
const imagePullBackOffStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-pull-backoff
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '%[1]s'
      operator: 'In'
      values: ['true']
    - key: '[.status.containerStatuses.[]?.state.waiting.reason] | any(. == "ImagePullBackOff")'
      operator: 'In'
      values: ['false']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: Ready
        reason: ContainersNotReady
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: ContainersReady
        reason: ContainersNotReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          waiting:
            reason: ImagePullBackOff
            message: {{ printf "Back-off pulling image %%q" .image | Quote }}
      {{ end }}
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      phase: Pending
      startTime: {{ $now | Quote }}
`

// kwokStages is kwok's configuration: its own fast node and pod stages, with pod-ready
// narrowed to pods whose images do not match failingImage, and imagePullBackOffStage for
// those that do.
func kwokStages(failingImage string) (string, error) {
	if _, err := regexp.Compile(failingImage); err != nil {
		return "", fmt.Errorf("--failing-image-pattern: %w", err)
	}
	matches := "[.spec.containers.[].image | test(" + strconv.Quote(failingImage) + ")] | any"
	quoted := strings.ReplaceAll(matches, "'", "''") // inside a single-quoted YAML scalar
	anchor := "    matchExpressions:\n"
	if !strings.Contains(podfast.DefaultPodReady, anchor) {
		return "", fmt.Errorf("kwok's pod-ready stage changed shape: no %q", strings.TrimSpace(anchor))
	}
	podReady := strings.Replace(podfast.DefaultPodReady, anchor,
		anchor+"    - key: '"+quoted+"'\n      operator: 'In'\n      values: ['false']\n", 1)
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeat,
		podReady,
		fmt.Sprintf(imagePullBackOffStage, quoted),
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, doc := range docs {
		docs[i] = strings.TrimSpace(doc)
	}
	return strings.Join(docs, "\n---\n") + "\n", nil
}
