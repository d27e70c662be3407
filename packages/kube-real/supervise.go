package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// options are the supervisor's flags.
type options struct {
	listen          string
	dataDir         string
	kubeconfigOut   string
	failingImage    string
	nodes           int
	etcdNoFsync     bool
	readyTimeout    time.Duration
	shutdownTimeout time.Duration
	kubeAPIQPS      int
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("flotilla-kube", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:6443", "host:port of the API server's secure port")
	fs.StringVar(&o.dataDir, "data-dir", ".flotilla/kube-real", "etcd's data, the PKI and every part's log; kept across restarts")
	fs.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "where to write an admin kubeconfig (default <data-dir>/admin.kubeconfig)")
	fs.StringVar(&o.failingImage, "failing-image-pattern", "fail", "a regular expression: pods with a matching image stay Pending in ImagePullBackOff")
	fs.IntVar(&o.nodes, "nodes", 2, "fake nodes kwok keeps (each with 1,000 CPUs, 1 TiB of memory and room for a million pods)")
	fs.BoolVar(&o.etcdNoFsync, "etcd-unsafe-no-fsync", false, "etcd skips fsync: faster tests, data lost on a machine crash")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 3*time.Minute, "how long the parts may take to become ready")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long the parts may take to stop before they are killed")
	fs.IntVar(&o.kubeAPIQPS, "controller-qps", 200, "client QPS of the controller manager and scheduler (burst twice that)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (parts are started by the supervisor, not by hand)", fs.Arg(0))
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil || net.ParseIP(host) == nil {
		return o, fmt.Errorf("--listen %q: want IP:port", o.listen)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return o, fmt.Errorf("--listen %q: bad port", o.listen)
	}
	if o.nodes < 1 {
		return o, errors.New("--nodes must be at least 1")
	}
	if o.dataDir, err = filepath.Abs(o.dataDir); err != nil {
		return o, err
	}
	if o.kubeconfigOut == "" {
		o.kubeconfigOut = filepath.Join(o.dataDir, "admin.kubeconfig")
	}
	return o, nil
}

// ports are the loopback ports etcd listens on, chosen once per data dir: etcd keeps its
// peer URL in its data, so a restart must find the same ones.
type ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

func loadPorts(path string) (ports, error) {
	var p ports
	if b, err := os.ReadFile(path); err == nil {
		return p, json.Unmarshal(b, &p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return p, err
	}
	var err error
	if p.EtcdClient, err = freePort(); err != nil {
		return p, err
	}
	if p.EtcdPeer, err = freePort(); err != nil {
		return p, err
	}
	b, _ := json.Marshal(p)
	return p, writeFile(path, b)
}

func supervise(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	host, _, _ := net.SplitHostPort(o.listen)
	server := "https://" + o.listen
	keys := pki{dir: filepath.Join(o.dataDir, "pki")}
	if err := keys.ensure([]string{host, "127.0.0.1"}); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	p, err := loadPorts(filepath.Join(o.dataDir, "ports.json"))
	if err != nil {
		return fmt.Errorf("ports: %w", err)
	}
	logDir := filepath.Join(o.dataDir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return err
	}

	etcd, err := startEtcd(o, p, logDir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	kubeconfigs := map[string]string{}
	for _, id := range []clientIdentity{adminIdentity, controllerManager, schedulerIdentity, kwokIdentity} {
		data, err := keys.kubeconfig(server, id)
		if err != nil {
			return err
		}
		path := filepath.Join(o.dataDir, id.file+".kubeconfig")
		if err := writeFile(path, data); err != nil {
			return err
		}
		kubeconfigs[id.file] = path
	}
	stages, err := kwokStages(o.failingImage)
	if err != nil {
		return err
	}
	kwokConfig := filepath.Join(o.dataDir, "kwok.yaml")
	if err := writeFile(kwokConfig, []byte(stages)); err != nil {
		return err
	}

	parts := &partSet{logDir: logDir, exited: make(chan partExit, 8)}
	defer parts.stop(o.shutdownTimeout)

	if err := parts.start("kube-apiserver", apiserverArgs(o, p, keys)); err != nil {
		return err
	}
	admin, err := clientFor(kubeconfigs["admin"])
	if err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, o.readyTimeout)
	defer cancel()
	if err := waitFor(readyCtx, parts, "the API server's /readyz", func(ctx context.Context) error {
		_, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}
	qps := strconv.Itoa(o.kubeAPIQPS)
	burst := strconv.Itoa(2 * o.kubeAPIQPS)
	if err := parts.start("kube-controller-manager", []string{
		"--kubeconfig=" + kubeconfigs["kube-controller-manager"],
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + keys.path("sa.key"),
		"--root-ca-file=" + keys.path("ca.crt"),
		"--kube-api-qps=" + qps,
		"--kube-api-burst=" + burst,
	}); err != nil {
		return err
	}
	if err := parts.start("kube-scheduler", []string{
		"--kubeconfig=" + kubeconfigs["kube-scheduler"],
		"--secure-port=0",
		"--leader-elect=false",
		"--kube-api-qps=" + qps,
		"--kube-api-burst=" + burst,
	}); err != nil {
		return err
	}
	if err := parts.start("kwok", []string{
		"--kubeconfig=" + kubeconfigs["kwok"],
		"--config=" + kwokConfig,
		"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
	}); err != nil {
		return err
	}
	if err := ensureNodes(readyCtx, admin, o.nodes); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	// Ready means a pod can be admitted and run: a node Ready (kwok runs) without the not-ready
	// taint (the node lifecycle controller runs) and the default ServiceAccount made.
	if err := waitFor(readyCtx, parts, "a Ready node and the default ServiceAccount", func(ctx context.Context) error {
		if _, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, node := range nodes.Items {
			if schedulable(node) {
				return nil
			}
		}
		return errors.New("no node is Ready and untainted yet")
	}); err != nil {
		return err
	}
	adminConfig, err := keys.kubeconfig(server, adminIdentity)
	if err != nil {
		return err
	}
	if err := writeFile(o.kubeconfigOut, adminConfig); err != nil {
		return err
	}
	fmt.Printf("flotilla-kube ready: server %s, kubeconfig %s, logs %s\n", server, o.kubeconfigOut, logDir)

	select {
	case <-ctx.Done():
		return nil
	case exit := <-parts.exited:
		return exit.err()
	case err := <-etcd.Err():
		return fmt.Errorf("etcd stopped: %w", err)
	}
}

// controllers are the controller manager's controllers this control plane runs: what the
// agent's objects need (Deployments, ReplicaSets, namespace deletion, owner references,
// ServiceAccounts and their tokens, PDBs, HPAs), the node lifecycle (it lifts the not-ready
// taint admission puts on a new node once kwok reports it Ready, and taints a node whose
// heartbeats stop), and nothing that needs a cloud or a real kubelet.
var controllers = []string{
	"node-lifecycle-controller",
	"deployment-controller",
	"replicaset-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"disruption-controller",
	"horizontal-pod-autoscaler-controller",
}

func apiserverArgs(o options, p ports, keys pki) []string {
	host, port, _ := net.SplitHostPort(o.listen)
	return []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.EtcdClient),
		"--bind-address=" + host,
		"--advertise-address=" + advertiseAddress(host),
		"--secure-port=" + port,
		"--tls-cert-file=" + keys.path("apiserver.crt"),
		"--tls-private-key-file=" + keys.path("apiserver.key"),
		"--client-ca-file=" + keys.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.path("sa.pub"),
		"--service-account-signing-key-file=" + keys.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--profiling=false",
		// Its address is loopback, which the kubernetes Service's endpoints may not hold.
		"--endpoint-reconciler-type=none",
	}
}

// advertiseAddress is the address the API server publishes in the kubernetes Service's
// endpoints; an unspecified bind address advertises loopback.
func advertiseAddress(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

func startEtcd(o options, p ports, logDir string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "flotilla-kube"
	cfg.Dir = filepath.Join(o.dataDir, "etcd")
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(p.EtcdClient)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(p.EtcdPeer)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogOutputs = []string{filepath.Join(logDir, "etcd.log")}
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = o.etcdNoFsync
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(o.readyTimeout):
		e.Close()
		return nil, errors.New("not ready in time")
	}
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func ensureNodes(ctx context.Context, client *kubernetes.Clientset, count int) error {
	for i := range count {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%d", i),
				Annotations: map[string]string{fakeNodeAnnotation: "fake"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/role": "agent"},
			},
		}
		// No capacity given: kwok's node stage sets its own (1,000 CPUs, 1 TiB, a million pods),
		// so a fleet's requests never make a pod unschedulable here.
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// schedulable says whether a node is Ready and free of the not-ready taint.
func schedulable(node corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor polls check until it succeeds, the context ends, or a part exits.
func waitFor(ctx context.Context, parts *partSet, what string, check func(context.Context) error) error {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %v (last: %v)", what, ctx.Err(), last)
		case exit := <-parts.exited:
			return exit.err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// partSet is the children this supervisor started.
type partSet struct {
	logDir string
	procs  []*exec.Cmd
	exited chan partExit
}

type partExit struct {
	name string
	log  string
	err_ error
}

func (e partExit) err() error {
	return fmt.Errorf("%s exited (%v); its log: %s", e.name, e.err_, e.log)
}

func (s *partSet) start(name string, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(s.logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A part never outlives its supervisor, even one killed with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	go func() {
		err := cmd.Wait()
		logFile.Close()
		s.exited <- partExit{name: name, log: logPath, err_: err}
	}()
	return nil
}

// stop asks every part to stop (last started first) and kills those still running after
// the timeout.
func (s *partSet) stop(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for i := len(s.procs) - 1; i >= 0; i-- {
		_ = s.procs[i].Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range s.procs {
		for cmd.ProcessState == nil && time.Now().Before(deadline) {
			if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
	}
}
