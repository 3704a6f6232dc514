//! Plugins as OCI artifacts: `plugin push` uploads a component and its manifest as layers of
//! one OCI image manifest; `plugin add oci://…` pulls them, checks every blob against its
//! descriptor's sha256 and a size cap, and (when asked or required by the policy) verifies a
//! cosign-style signature of the manifest digest before anything is installed.
//!
//! Layout: image manifest `application/vnd.oci.image.manifest.v1+json` with `artifactType`
//! [`ARTIFACT_TYPE`], config [`CONFIG_MEDIA_TYPE`] (the CNCF wasm OCI layout's), one
//! [`WASM_LAYER`] and one [`MANIFEST_LAYER`].

pub mod auth;
pub mod client;
pub mod reference;
pub mod sign;

use ::http::Method;
use bytes::Bytes;
use client::Client;
pub use reference::{is_oci, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The OCI image manifest media type.
pub const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The artifact type of a toolgate plugin.
pub const ARTIFACT_TYPE: &str = "application/vnd.toolgate.plugin.v1";
/// The config blob's media type (the CNCF wasm OCI artifact layout's).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer.
pub const WASM_LAYER: &str = "application/wasm";
/// The plugin manifest layer (`toolgate-plugin.toml`).
pub const MANIFEST_LAYER: &str = "application/vnd.toolgate.plugin.manifest.v1+toml";
/// The config of a cosign signature manifest.
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// Most bytes of a component layer.
pub const MAX_COMPONENT_BYTES: u64 = 128 << 20;
/// Most bytes of an image manifest, a config, a plugin manifest or a signature payload.
pub const MAX_SMALL_BYTES: u64 = 1 << 20;

/// An OCI content descriptor.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// `sha256:HEX`.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
    /// Annotations (a cosign signature is one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest (the fields toolgate reads and writes).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`IMAGE_MANIFEST`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// [`ARTIFACT_TYPE`] for a plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `sha256:HEX` of some bytes.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn descriptor(media_type: &str, bytes: &[u8], title: Option<&str>) -> Descriptor {
    let mut annotations = BTreeMap::new();
    if let Some(t) = title {
        annotations.insert("org.opencontainers.image.title".into(), t.to_string());
    }
    Descriptor {
        media_type: media_type.into(),
        digest: digest_of(bytes),
        size: bytes.len() as u64,
        annotations,
    }
}

/// What `plugin add oci://…` pulled, every byte checked against the pinned manifest digest.
pub struct Pulled {
    /// The image manifest's digest (`sha256:HEX`): what the install pins.
    pub digest: String,
    /// The component's bytes.
    pub component: Vec<u8>,
    /// The plugin manifest's text.
    pub manifest: String,
    /// The keys the signature verified with (empty: no signature was asked for).
    pub verified_by: Vec<std::path::PathBuf>,
}

/// Which signatures a pull must find: each set needs one key of it that verifies.
#[derive(Clone, Debug, Default)]
pub struct Verify {
    /// Sets of keys: `--verify-key` is a set of one, the policy's `trusted_keys` another.
    pub any_of: Vec<(String, Vec<sign::TrustedKey>)>,
}

/// Pull the plugin at `r`: the manifest (its digest must be `r`'s when `r` names one), the
/// signature when `verify` asks for one, then the config, component and manifest blobs, each
/// checked against its descriptor. Nothing is written.
pub async fn pull(r: &Reference, verify: &Verify, workspace: &Path) -> Result<Pulled, String> {
    let shown = r.display();
    let mut client = Client::new(r, "pull", workspace);
    let (digest, manifest) = get_manifest(&mut client, r, r.target())
        .await?
        .ok_or_else(|| {
            format!(
                "{shown}: the registry has no such artifact (404); check the repository and tag"
            )
        })?;
    if let Some(want) = &r.digest {
        if &digest != want {
            return Err(format!(
                "{shown}: the registry sent a manifest whose digest is {digest}, not the {want} asked for; refused"
            ));
        }
    }
    if manifest.artifact_type.as_deref() != Some(ARTIFACT_TYPE) {
        return Err(format!(
            "{shown} is not a toolgate plugin artifact: its artifactType is {}, not {ARTIFACT_TYPE} (publish plugins with `toolgate plugin push`)",
            manifest.artifact_type.as_deref().unwrap_or("missing")
        ));
    }
    let mut verified_by = Vec::new();
    for (what, keys) in &verify.any_of {
        verified_by.push(check_signature(&mut client, r, &digest, what, keys).await?);
    }
    let layer = |media: &str| -> Result<&Descriptor, String> {
        let mut found = manifest.layers.iter().filter(|l| l.media_type == media);
        match (found.next(), found.next()) {
            (Some(l), None) => Ok(l),
            (None, _) => Err(format!(
                "{shown} has no {media} layer; it is not a toolgate plugin artifact"
            )),
            (Some(_), Some(_)) => Err(format!("{shown} has more than one {media} layer; refused")),
        }
    };
    let wasm = layer(WASM_LAYER)?.clone();
    let toml = layer(MANIFEST_LAYER)?.clone();
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "{shown}: its config is {}, not {CONFIG_MEDIA_TYPE}; refused",
            manifest.config.media_type
        ));
    }
    get_blob(&mut client, &shown, &manifest.config, MAX_SMALL_BYTES).await?;
    let component = get_blob(&mut client, &shown, &wasm, MAX_COMPONENT_BYTES).await?;
    let text = get_blob(&mut client, &shown, &toml, MAX_SMALL_BYTES).await?;
    let manifest = String::from_utf8(text)
        .map_err(|_| format!("{shown}: its plugin manifest layer is not UTF-8 text"))?;
    Ok(Pulled {
        digest,
        component,
        manifest,
        verified_by,
    })
}

/// Fetch and parse the image manifest at `target` (tag or digest): `None` on 404.
async fn get_manifest(
    client: &mut Client,
    r: &Reference,
    target: &str,
) -> Result<Option<(String, ImageManifest)>, String> {
    let shown = r.display();
    let url = client.url(&format!("manifests/{target}"));
    let resp = client
        .send(
            Method::GET,
            &url,
            &[("accept", IMAGE_MANIFEST.to_string())],
            Bytes::new(),
            MAX_SMALL_BYTES,
        )
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    if resp.status == 404 {
        return Ok(None);
    }
    if resp.status != 200 {
        return Err(format!(
            "{shown}: the registry answered {} for the manifest {target}: {}",
            resp.status,
            String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)])
        ));
    }
    let digest = digest_of(&resp.body);
    if let Some(said) = resp.header("docker-content-digest") {
        if said.starts_with("sha256:") && said != digest {
            return Err(format!(
                "{shown}: the registry says the manifest is {said} but its bytes are {digest}; refused"
            ));
        }
    }
    let m: ImageManifest = serde_json::from_slice(&resp.body).map_err(|e| {
        format!("{shown}: the manifest {target} is not an OCI image manifest ({e})")
    })?;
    if m.schema_version != 2 || m.media_type.as_deref().is_some_and(|t| t != IMAGE_MANIFEST) {
        return Err(format!(
            "{shown}: the manifest {target} is not an OCI image manifest ({IMAGE_MANIFEST}, schemaVersion 2)"
        ));
    }
    Ok(Some((digest, m)))
}

/// Fetch a blob, refusing one larger than `cap` or than its descriptor, or whose sha256 is not
/// the descriptor's.
async fn get_blob(
    client: &mut Client,
    shown: &str,
    d: &Descriptor,
    cap: u64,
) -> Result<Vec<u8>, String> {
    if d.size > cap {
        return Err(format!(
            "{shown}: its {} layer says it is {} bytes, more than the {cap} toolgate accepts; refused, nothing installed",
            d.media_type, d.size
        ));
    }
    if !d.digest.starts_with("sha256:") {
        return Err(format!(
            "{shown}: the {} layer's digest {} is not sha256; refused",
            d.media_type, d.digest
        ));
    }
    let url = client.url(&format!("blobs/{}", d.digest));
    let resp = client
        .send(Method::GET, &url, &[], Bytes::new(), d.size)
        .await
        .map_err(|e| format!("{shown}: the {} layer {}: {e}", d.media_type, d.digest))?;
    if resp.status != 200 {
        return Err(format!(
            "{shown}: the registry answered {} for the {} layer {}",
            resp.status, d.media_type, d.digest
        ));
    }
    let got = digest_of(&resp.body);
    if got != d.digest || resp.body.len() as u64 != d.size {
        return Err(format!(
            "{shown}: the {} layer the registry sent has sha256 {got} ({} bytes), but the manifest says {} ({} bytes): the registry (or something between) sent other bytes; refused, nothing installed",
            d.media_type,
            resp.body.len(),
            d.digest,
            d.size
        ));
    }
    Ok(resp.body.to_vec())
}

/// Find a cosign signature of `digest` that verifies with one of `keys` and names this digest
/// and repository. Returns the key that verified.
async fn check_signature(
    client: &mut Client,
    r: &Reference,
    digest: &str,
    what: &str,
    keys: &[sign::TrustedKey],
) -> Result<std::path::PathBuf, String> {
    let shown = r.display();
    let names = keys
        .iter()
        .map(|k| k.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let fix = "ask its publisher for an artifact signed with a key you trust (`toolgate plugin push --sign-key` or `cosign sign --key`), or check which key you pass";
    if keys.is_empty() {
        return Err(format!("{shown}: {what} requires a signature, but no trusted key is configured; add public keys to `[plugins] trusted_keys` in your user policy"));
    }
    let tag = sign::signature_tag(digest);
    let sig_ref = r.with_tag(&tag);
    let Some((_, m)) = get_manifest(client, &sig_ref, &tag).await? else {
        return Err(format!(
            "{shown} ({digest}) is not signed: there is no {}; {what} requires a signature with {names}; {fix}",
            sig_ref.display()
        ));
    };
    let mut why = Vec::new();
    for layer in m
        .layers
        .iter()
        .filter(|l| l.media_type == sign::SIMPLESIGNING)
    {
        let Some(sig) = layer.annotations.get(sign::SIGNATURE_ANNOTATION) else {
            continue;
        };
        let payload = match get_blob(client, &shown, layer, MAX_SMALL_BYTES).await {
            Ok(p) => p,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        let Some(key) = keys.iter().find(|k| sign::verifies(k, &payload, sig)) else {
            why.push(format!("a signature does not verify with {names}"));
            continue;
        };
        match sign::check_claims(&payload, &r.name(), digest) {
            Ok(()) => return Ok(key.path.clone()),
            Err(e) => why.push(e),
        }
    }
    if why.is_empty() {
        why.push(format!(
            "{} holds no cosign signature layer",
            sig_ref.display()
        ));
    }
    Err(format!(
        "{shown} ({digest}): no valid signature for {what} ({}); refused, nothing installed; {fix}",
        why.join("; ")
    ))
}

/// Upload one blob (skipped when the registry has it): monolithic POST then PUT.
async fn put_blob(client: &mut Client, shown: &str, bytes: &[u8]) -> Result<(), String> {
    let digest = digest_of(bytes);
    let url = client.url(&format!("blobs/{digest}"));
    let head = client
        .send(Method::HEAD, &url, &[], Bytes::new(), 0)
        .await?;
    if head.status == 200 {
        return Ok(());
    }
    let start = client
        .send(
            Method::POST,
            &client.url("blobs/uploads/"),
            &[],
            Bytes::new(),
            MAX_SMALL_BYTES,
        )
        .await?;
    let location = match (start.status, start.header("location")) {
        (202, Some(l)) => client.resolve(l),
        (s, _) => {
            return Err(format!(
                "{shown}: the registry answered {s} to starting an upload: {}",
                String::from_utf8_lossy(&start.body[..start.body.len().min(300)])
            ))
        }
    };
    let sep = if location.contains('?') { '&' } else { '?' };
    let put = format!("{location}{sep}digest={}", client::encode(&digest));
    let done = client
        .send(
            Method::PUT,
            &put,
            &[("content-type", "application/octet-stream".into())],
            Bytes::copy_from_slice(bytes),
            MAX_SMALL_BYTES,
        )
        .await?;
    if done.status != 201 {
        return Err(format!(
            "{shown}: the registry answered {} to the upload of {digest}: {}",
            done.status,
            String::from_utf8_lossy(&done.body[..done.body.len().min(300)])
        ));
    }
    Ok(())
}

async fn put_manifest(
    client: &mut Client,
    shown: &str,
    tag: &str,
    m: &ImageManifest,
) -> Result<String, String> {
    let body = serde_json::to_vec(m).map_err(|e| format!("cannot write the manifest: {e}"))?;
    let digest = digest_of(&body);
    let url = client.url(&format!("manifests/{tag}"));
    let resp = client
        .send(
            Method::PUT,
            &url,
            &[("content-type", IMAGE_MANIFEST.into())],
            Bytes::from(body),
            MAX_SMALL_BYTES,
        )
        .await?;
    if resp.status != 201 {
        return Err(format!(
            "{shown}: the registry answered {} to the manifest: {}",
            resp.status,
            String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)])
        ));
    }
    Ok(digest)
}

/// What `plugin push` uploaded.
pub struct Pushed {
    /// The image manifest's digest.
    pub digest: String,
    /// Where the signature went, when one was made.
    pub signature: Option<String>,
}

/// Push `component` and its plugin manifest `manifest` (TOML text) to `r` (a tag), and sign
/// the manifest digest with `key` if given (replacing the tag's earlier signatures).
pub async fn push(
    r: &Reference,
    component: &[u8],
    manifest: &str,
    annotations: BTreeMap<String, String>,
    key: Option<&p256::ecdsa::SigningKey>,
    workspace: &Path,
) -> Result<Pushed, String> {
    let shown = r.display();
    let tag = r
        .tag
        .as_deref()
        .filter(|_| r.digest.is_none())
        .ok_or_else(|| format!("{shown}: push to a tag (oci://REGISTRY/REPO:TAG); a digest is what the push prints"))?;
    let mut client = Client::new(r, "pull,push", workspace);
    let wasm = descriptor(WASM_LAYER, component, Some("component.wasm"));
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [wasm.digest],
        "component": { "target": "toolgate:tool/tool@0.1.0" },
    }))
    .map_err(|e| e.to_string())?;
    for blob in [&config[..], component, manifest.as_bytes()] {
        put_blob(&mut client, &shown, blob).await?;
    }
    let m = ImageManifest {
        schema_version: 2,
        media_type: Some(IMAGE_MANIFEST.into()),
        artifact_type: Some(ARTIFACT_TYPE.into()),
        config: descriptor(CONFIG_MEDIA_TYPE, &config, None),
        layers: vec![
            wasm,
            descriptor(
                MANIFEST_LAYER,
                manifest.as_bytes(),
                Some("toolgate-plugin.toml"),
            ),
        ],
        annotations,
    };
    let digest = put_manifest(&mut client, &shown, tag, &m).await?;
    let signature = match key {
        None => None,
        Some(k) => Some(push_signature(&mut client, r, &digest, k).await?),
    };
    Ok(Pushed { digest, signature })
}

/// Sign `digest` and store it as cosign does: tag `sha256-HEX.sig`, one simple-signing layer.
pub async fn push_signature(
    client: &mut Client,
    r: &Reference,
    digest: &str,
    key: &p256::ecdsa::SigningKey,
) -> Result<String, String> {
    let shown = r.display();
    let payload = sign::payload(&r.name(), digest);
    let mut layer = descriptor(sign::SIMPLESIGNING, &payload, None);
    layer
        .annotations
        .insert(sign::SIGNATURE_ANNOTATION.into(), sign::sign(key, &payload));
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "", "os": "", "config": {},
        "rootfs": { "type": "layers", "diff_ids": [layer.digest] },
    }))
    .map_err(|e| e.to_string())?;
    put_blob(client, &shown, &payload).await?;
    put_blob(client, &shown, &config).await?;
    let m = ImageManifest {
        schema_version: 2,
        media_type: Some(IMAGE_MANIFEST.into()),
        artifact_type: None,
        config: descriptor(OCI_CONFIG, &config, None),
        layers: vec![layer],
        annotations: BTreeMap::new(),
    };
    let tag = sign::signature_tag(digest);
    put_manifest(client, &shown, &tag, &m).await?;
    Ok(r.with_tag(&tag).display())
}
