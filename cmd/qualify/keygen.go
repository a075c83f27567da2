package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/attest"
)

// keygenCommand is qualify keygen's help and flag set; its options are
// keygenOptions.
func keygenCommand() *cli.Command {
	c := cli.New("qualify keygen", "--out DIR", "Generate an ed25519 key pair for signing reports and print the paths and key ID.")
	c.Details = `The private key is written with mode 0600 and never overwrites an
existing key; keep it out of the repository. The public key verifies the
reports (qualify verify --key, cosign verify-blob-attestation --key).`
	return c
}

// keygenOptions are the flags of qualify keygen; it takes no positional
// arguments.
type keygenOptions struct {
	cli.Positional
	out string
}

// AddFlags declares o's flags on fs.
func (o *keygenOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.out, "out", "", "`DIR` for qualbox-ed25519.key (0600) and qualbox-ed25519.pub")
}

// Validate requires --out and no positional argument.
func (o *keygenOptions) Validate() error {
	if o.out == "" || len(o.Args) > 0 {
		return cli.UsageError("--out DIR is required and no positional arguments are allowed")
	}
	return nil
}

// Exec writes the key pair into --out, refusing to overwrite either key
// file (exitcode.Usage), and prints both paths and the key ID.
func (o *keygenOptions) Exec(_ context.Context, stdout, _ io.Writer) (int, error) {
	for _, name := range []string{attest.PrivateKeyFile, attest.PublicKeyFile} {
		if p := filepath.Join(o.out, name); exists(p) {
			return 0, cli.Exitf(exitcode.Usage, "qualify keygen: %s exists: refusing to overwrite a key", p)
		}
	}
	priv, pub, err := attest.GenerateKey(o.out)
	if err != nil {
		return 0, failed(exitcode.Internal, err)
	}
	k, err := attest.LoadPublicKey(pub)
	if err != nil {
		return 0, failed(exitcode.Internal, err)
	}
	fmt.Fprintf(stdout, "private key: %s\npublic key:  %s\nkey id:      %s\n", priv, pub, attest.KeyID(k))
	return exitcode.OK, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
