package attest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// SignPayload signs payload (an in-toto Statement as JSON) with key as one
// DSSE envelope of PayloadType, the same envelope shape and key ID that
// Sign writes, and returns the envelope as indented JSON with a final
// newline. It is for the standard statements that sit beside a report's
// EnvelopeFile (docs/qualification.md#standard-attestations).
func SignPayload(ctx context.Context, key ed25519.PrivateKey, payload []byte) ([]byte, error) {
	_, data, err := signEnvelope(ctx, key, payload)
	return data, err
}

// signEnvelope signs payload with key as one DSSE envelope of PayloadType
// and returns it with its file form: indented JSON and a final newline.
func signEnvelope(ctx context.Context, key ed25519.PrivateKey, payload []byte) (*dsse.Envelope, []byte, error) {
	es, err := dsse.NewEnvelopeSigner(signer{key})
	if err != nil {
		return nil, nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return env, append(data, '\n'), nil
}

// OpenEnvelope checks data, the bytes of the envelope file named file, as
// Verify checks EnvelopeFile: at most MaxEnvelopeBytes (else a
// *LimitError), strictly decoded JSON, payloadType PayloadType, at most
// MaxSignatures signatures, one of them an ed25519 signature by key over
// the DSSE PAE. It returns the signed payload's bytes; errors name file.
func OpenEnvelope(ctx context.Context, key ed25519.PublicKey, data []byte, file string) ([]byte, error) {
	if n := int64(len(data)); n > MaxEnvelopeBytes {
		return nil, &LimitError{File: file, Limit: "MaxEnvelopeBytes", Max: MaxEnvelopeBytes, Got: n}
	}
	var env dsse.Envelope
	if err := strictJSONFile(data, file, &env); err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("payloadType %q: want %q", env.PayloadType, PayloadType)
	}
	if n := len(env.Signatures); n > MaxSignatures {
		return nil, &LimitError{File: file, Limit: "MaxSignatures", Max: MaxSignatures, Got: int64(n)}
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{key})
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if _, err := ev.Verify(ctx, &env); err != nil {
		return nil, fmt.Errorf("signature: no signature by key %s verifies (%v)", KeyID(key), err)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return payload, nil
}
