package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the control plane's own trust: one CA signs the API server's serving certificate
// and every client certificate; a separate RSA key signs ServiceAccount tokens. Made once
// per data dir and kept, so a restart keeps every kubeconfig and token valid.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// clientIdentity is a client certificate's subject: CN is the user, O the groups.
type clientIdentity struct {
	file   string
	user   string
	groups []string
}

var (
	adminIdentity     = clientIdentity{"admin", "flotilla-admin", []string{"system:masters"}}
	controllerManager = clientIdentity{"kube-controller-manager", "system:kube-controller-manager", nil}
	schedulerIdentity = clientIdentity{"kube-scheduler", "system:kube-scheduler", nil}
	// kwok plays every node's kubelet; the Node authorizer would confine a single kubelet to
	// its node, so the stand-in for all of them is an admin.
	kwokIdentity = clientIdentity{"kwok", "flotilla-kwok", []string{"system:masters"}}
)

func (p pki) ensure(hosts []string) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(p.path("ca.crt")); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "flotilla-kube-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("10.96.0.1")},
	}
	for _, host := range hosts {
		if ip := net.ParseIP(host); ip != nil {
			serving.IPAddresses = append(serving.IPAddresses, ip)
		} else {
			serving.DNSNames = append(serving.DNSNames, host)
		}
	}
	if err := p.issue("apiserver", serving, ca, caKey); err != nil {
		return err
	}
	for _, id := range []clientIdentity{adminIdentity, controllerManager, schedulerIdentity, kwokIdentity} {
		client := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.issue(id.file, client, ca, caKey); err != nil {
			return err
		}
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("ca.key"), "EC PRIVATE KEY", caKeyDER); err != nil {
		return err
	}
	// ca.crt last: its presence says the set is complete.
	return writePEM(p.path("ca.crt"), "CERTIFICATE", caDER)
}

func (p pki) issue(name string, template, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	template.SerialNumber = serial()
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().AddDate(10, 0, 0)
	template.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".key"), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(p.path(name+".crt"), "CERTIFICATE", der)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

// writePEM writes a key or certificate readable by its owner only, never partly: a crash
// mid-write leaves the old file or none.
func writePEM(path, kind string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// kubeconfig is a kubeconfig for one client identity of this control plane.
func (p pki) kubeconfig(server string, id clientIdentity) ([]byte, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(p.path(name))
		return string(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return nil, err
	}
	cert, err := read(id.file + ".crt")
	if err != nil {
		return nil, err
	}
	key, err := read(id.file + ".key")
	if err != nil {
		return nil, err
	}
	b64 := func(s string) string { return base64(s) }
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: flotilla-kube
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: flotilla-kube
  context:
    cluster: flotilla-kube
    user: %s
current-context: flotilla-kube
`, server, b64(ca), id.user, b64(cert), b64(key), id.user), nil
}
