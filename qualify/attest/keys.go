package attest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Key file names written by GenerateKey.
const (
	PrivateKeyFile = "qualbox-ed25519.key"
	PublicKeyFile  = "qualbox-ed25519.pub"
)

// GenerateKey writes a fresh ed25519 key pair into dir (created 0700 if
// missing): PrivateKeyFile (PEM "PRIVATE KEY", PKCS#8, mode 0600) and
// PublicKeyFile (PEM "PUBLIC KEY", PKIX, mode 0644). It refuses to
// overwrite either file and returns their paths.
func GenerateKey(dir string) (priv, pub string, err error) {
	pubKey, privKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(privKey)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pubKey)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	priv, pub = filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{priv, pub} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("attest: %s exists: refusing to overwrite a key", p)
		}
	}
	if err := writeNew(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", err
	}
	return priv, pub, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

func readPEM(path, wantType string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != wantType || len(rest) != 0 {
		return nil, fmt.Errorf("attest: %s: want exactly one PEM %q block", path, wantType)
	}
	return block.Bytes, nil
}

// LoadPrivateKey reads a PEM PKCS#8 ed25519 private key.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("attest: %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("attest: %s: want an ed25519 key, got %T", path, k)
	}
	return priv, nil
}

// LoadPublicKey reads a PEM PKIX ed25519 public key.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("attest: %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("attest: %s: want an ed25519 key, got %T", path, k)
	}
	return pub, nil
}

// KeyID is the hex SHA-256 of the key's PKIX DER encoding (the same as
// dsse.SHA256KeyID), recorded as the signature's keyid.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // an ed25519.PublicKey always marshals
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
