//! Cosign-compatible signatures: ECDSA P-256 over SHA-256 of a "simple signing" JSON payload
//! that names the artifact's manifest digest and repository, kept in the same repository
//! under the tag `sha256-HEX.sig`.

use base64::Engine;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use std::path::{Path, PathBuf};

/// The cosign signature layer's media type.
pub const SIMPLESIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding the base64 DER signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a cosign payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The tag cosign keeps the signatures of `digest` (`sha256:HEX`) under.
pub fn signature_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1) + ".sig"
}

/// A public key someone trusts, and where it came from.
#[derive(Clone, Debug)]
pub struct TrustedKey {
    /// The PEM file.
    pub path: PathBuf,
    key: VerifyingKey,
}

/// Read a PEM public key (`-----BEGIN PUBLIC KEY-----`, SPKI, as `cosign generate-key-pair`
/// and `openssl pkey -pubout` write it).
pub fn read_public_key(path: &Path) -> Result<TrustedKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the public key {} cannot be read: {e}", path.display()))?;
    let key = VerifyingKey::from_public_key_pem(text.trim()).map_err(|_| {
        format!(
            "{} is not a P-256 public key in PEM (-----BEGIN PUBLIC KEY-----, as `cosign generate-key-pair` writes cosign.pub)",
            path.display()
        )
    })?;
    Ok(TrustedKey {
        path: path.to_path_buf(),
        key,
    })
}

/// Read an unencrypted PKCS#8 (`-----BEGIN PRIVATE KEY-----`, as `openssl genpkey -algorithm
/// EC -pkeyopt ec_paramgen_curve:P-256` writes) or SEC1 (`-----BEGIN EC PRIVATE KEY-----`)
/// P-256 private key.
pub fn read_private_key(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the signing key {} cannot be read: {e}", path.display()))?;
    if text.contains("ENCRYPTED") {
        return Err(format!(
            "{} is an encrypted key (cosign's own format, or encrypted PKCS#8), which toolgate does not read; export an unencrypted PKCS#8 key (e.g. `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem`, public half with `openssl pkey -in key.pem -pubout -out key.pub`) and keep it private",
            path.display()
        ));
    }
    let text = text.trim();
    p256::SecretKey::from_pkcs8_pem(text)
        .or_else(|_| p256::SecretKey::from_sec1_pem(text))
        .map(SigningKey::from)
        .map_err(|_| {
            format!(
                "{} is not a P-256 private key in PEM (-----BEGIN PRIVATE KEY----- PKCS#8, as `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes)",
                path.display()
            )
        })
}

/// The simple-signing payload for `digest` in repository `name` (`REGISTRY/REPO`).
pub fn payload(name: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": { "docker-reference": name },
            "image": { "docker-manifest-digest": digest },
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// Sign `payload`: the base64 DER signature for the annotation.
pub fn sign(key: &SigningKey, payload: &[u8]) -> String {
    let sig: Signature = key.sign(payload);
    base64::engine::general_purpose::STANDARD.encode(sig.to_der().as_bytes())
}

/// Whether `signature` (base64 DER, or base64 of the 64-byte fixed form) verifies `payload`
/// with `key`.
pub fn verifies(key: &TrustedKey, payload: &[u8], signature: &str) -> bool {
    let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
        return false;
    };
    let sig = Signature::from_der(&raw).or_else(|_| Signature::from_slice(&raw));
    sig.is_ok_and(|s| key.key.verify(payload, &s).is_ok())
}

/// Check a verified payload's claims: it must be a cosign payload for `digest` in `name`.
pub fn check_claims(payload: &[u8], name: &str, digest: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|_| "its signed payload is not JSON".to_string())?;
    let c = &v["critical"];
    if c["type"].as_str() != Some(PAYLOAD_TYPE) {
        return Err(format!("its signed payload is not a `{PAYLOAD_TYPE}`"));
    }
    let signed = c["image"]["docker-manifest-digest"].as_str().unwrap_or("");
    if signed != digest {
        return Err(format!(
            "the signature is for {signed}, not for this artifact's {digest} (a signature copied from another artifact)"
        ));
    }
    let r = c["identity"]["docker-reference"].as_str().unwrap_or("");
    if r != name {
        return Err(format!(
            "the signature names the repository `{r}`, not `{name}` (an artifact copied from another repository)"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};

    fn keypair(seed: u8, dir: &Path) -> (PathBuf, PathBuf) {
        let sk = p256::SecretKey::from_slice(&[seed; 32]).unwrap();
        let private = dir.join(format!("k{seed}.pem"));
        let public = dir.join(format!("k{seed}.pub"));
        std::fs::write(
            &private,
            sk.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
        )
        .unwrap();
        std::fs::write(
            &public,
            sk.public_key().to_public_key_pem(LineEnding::LF).unwrap(),
        )
        .unwrap();
        (private, public)
    }

    #[test]
    fn a_signature_verifies_with_its_key_only_and_binds_digest_and_repository() {
        let dir = tempfile::tempdir().unwrap();
        let (sk1, pk1) = keypair(1, dir.path());
        let (_, pk2) = keypair(2, dir.path());
        let d = format!("sha256:{}", "b".repeat(64));
        let p = payload("localhost:5000/wc", &d);
        let sig = sign(&read_private_key(&sk1).unwrap(), &p);
        assert!(verifies(&read_public_key(&pk1).unwrap(), &p, &sig));
        assert!(
            !verifies(&read_public_key(&pk2).unwrap(), &p, &sig),
            "wrong key"
        );
        let mut tampered = p.clone();
        tampered[5] ^= 1;
        assert!(!verifies(&read_public_key(&pk1).unwrap(), &tampered, &sig));
        check_claims(&p, "localhost:5000/wc", &d).unwrap();
        let other = format!("sha256:{}", "c".repeat(64));
        assert!(check_claims(&p, "localhost:5000/wc", &other)
            .unwrap_err()
            .contains("not for this artifact"));
        assert!(check_claims(&p, "localhost:5000/other", &d)
            .unwrap_err()
            .contains("not `localhost:5000/other`"));
        assert_eq!(signature_tag(&d), format!("sha256-{}.sig", "b".repeat(64)));
    }

    #[test]
    fn bad_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cosign.key");
        std::fs::write(&f, "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nx\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n").unwrap();
        assert!(read_private_key(&f).unwrap_err().contains("encrypted key"));
        std::fs::write(&f, "nonsense").unwrap();
        assert!(read_public_key(&f).unwrap_err().contains("cosign.key"));
    }
}
