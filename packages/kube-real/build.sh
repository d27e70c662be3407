#!/usr/bin/env bash
# Builds bin/flotilla-kube. The parts report the Kubernetes version go.mod pins (a plain
# `go build` leaves it v0.0.0-master, which kubectl reads as a version skew).
set -euo pipefail
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=$(echo "${version#v}" | cut -d. -f1)
minor=$(echo "${version#v}" | cut -d. -f2)
pkg=k8s.io/component-base/version
go build -trimpath \
  -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
  -o bin/flotilla-kube .
