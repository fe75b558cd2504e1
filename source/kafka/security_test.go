package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

const testPassword = "hunter2-very-secret"

func TestSASL(t *testing.T) {
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kafkatest.NewCluster(kafkatest.Config{
				Topics: []kafkatest.Topic{{Name: "t", Partitions: 1}},
				Opts:   []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(mech, "alice", testPassword)},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var m kgo.Opt
			switch mech {
			case SASLPlain:
				m = kgo.SASL(plain.Auth{User: "alice", Pass: testPassword}.AsMechanism())
			case SASLScramSHA256:
				m = kgo.SASL(scram.Auth{User: "alice", Pass: testPassword}.AsSha256Mechanism())
			default:
				m = kgo.SASL(scram.Auth{User: "alice", Pass: testPassword}.AsSha512Mechanism())
			}
			pcl, err := c.Client(m)
			if err != nil {
				t.Fatal(err)
			}
			defer pcl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}

			uri := fmt.Sprintf("kafka://alice:%s@%s/t?bounded=true&sasl=%s", testPassword, c.Bootstrap(), strings.ToLower(mech))
			cfg, err := ParseURI(uri)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnectTimeout = 5 * time.Second
			s := mustOpen(t, cfg, nil)
			if got := values(readToEOF(t, s)); !slices.Equal(got, []string{"v"}) {
				t.Fatalf("got %v", got)
			}
			if d := s.Describe(); strings.Contains(d, testPassword) {
				t.Fatalf("Describe leaks the password: %q", d)
			}

			// A wrong password fails, and the error does not show either
			// password.
			cfg.SASL.Password = Secret(testPassword + "-wrong")
			_, err = Open(ctx, cfg, nil)
			if err == nil {
				t.Fatal("Open with a wrong password succeeded")
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Fatalf("error leaks the password: %v", err)
			}
			t.Log(err)
		})
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, serverCfg := selfSigned(t, dir)
	c, err := kafkatest.NewCluster(kafkatest.Config{
		Topics: []kafkatest.Topic{{Name: "t", Partitions: 1}},
		Opts:   []kfake.Opt{kfake.TLS(serverCfg)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pem)
	pcl, err := c.Client(kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("tls")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cfg, err := ParseURI("kafka://" + c.Bootstrap() + "/t?bounded=true&tls_ca=" + caFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(readToEOF(t, mustOpen(t, cfg, nil))); !slices.Equal(got, []string{"tls"}) {
		t.Fatalf("got %v", got)
	}
	// Without the CA, the broker's certificate is not trusted.
	cfg.TLS.CAFile = ""
	cfg.ConnectTimeout = 2 * time.Second
	if _, err := Open(ctx, cfg, nil); err == nil {
		t.Fatal("Open trusted an unknown CA")
	}
	// Unless verification is off.
	cfg.TLS.InsecureSkipVerify = true
	if got := values(readToEOF(t, mustOpen(t, cfg, nil))); !slices.Equal(got, []string{"tls"}) {
		t.Fatalf("insecure: got %v", got)
	}
	// A CA file that does not exist is named.
	cfg.TLS = &TLSConfig{CAFile: filepath.Join(dir, "missing.pem")}
	if _, err := Open(ctx, cfg, nil); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing CA file: %v", err)
	}
}

// selfSigned writes a CA certificate to dir and returns its path and a
// server TLS config with a certificate for 127.0.0.1 signed by it.
func selfSigned(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
		MinVersion:   tls.VersionTLS12,
	}
}
