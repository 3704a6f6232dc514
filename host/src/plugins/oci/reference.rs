//! `oci://REGISTRY/REPO:TAG` and `oci://REGISTRY/REPO@sha256:DIGEST`.

use std::net::IpAddr;

/// The scheme every OCI reference starts with.
pub const SCHEME: &str = "oci://";

/// A parsed `oci://` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]` as written (`localhost:5000`, `[::1]:5000`, `ghcr.io`).
    pub registry: String,
    /// The repository path inside the registry (`team/word-count`).
    pub repository: String,
    /// The tag, if one was named.
    pub tag: Option<String>,
    /// `sha256:HEX`, if a digest was named.
    pub digest: Option<String>,
}

/// Whether `source` is meant as an OCI reference (it starts with `oci://`).
pub fn is_oci(source: &str) -> bool {
    source.starts_with(SCHEME)
}

impl Reference {
    /// Parse `oci://REGISTRY/REPO:TAG`, `oci://REGISTRY/REPO@sha256:HEX` or both
    /// (`REPO:TAG@sha256:HEX`: the digest decides, the tag is only shown).
    pub fn parse(text: &str) -> Result<Reference, String> {
        let bad = |why: &str| {
            format!("`{text}` is not an OCI reference: {why} (write oci://REGISTRY/REPO:TAG or oci://REGISTRY/REPO@sha256:DIGEST)")
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it does not start with oci://"))?;
        let (rest, digest) = match rest.split_once('@') {
            Some((r, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or_else(|| bad("the digest must be sha256:HEX"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("a sha256 digest is 64 hex digits"));
                }
                (r, Some(format!("sha256:{}", hex.to_ascii_lowercase())))
            }
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no repository after the registry"))?;
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
        {
            return Err(bad("the registry must be HOST or HOST:PORT"));
        }
        // A tag is after the last `:` of the last path component.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_string())),
            _ => (path, None),
        };
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                && !t.starts_with(['.', '-']);
            if !ok {
                return Err(bad(&format!(
                    "tag `{t}` is not valid (letters, digits, `._-`, at most 128)"
                )));
            }
        }
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && c.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if repository.len() > 255 || !repository.split('/').all(component_ok) {
            return Err(bad(&format!(
                "repository `{repository}` is not valid (lowercase letters, digits and `._-` between `/`)"
            )));
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("name a tag (`:TAG`) or a digest (`@sha256:…`)"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// `REGISTRY/REPO`: what cosign signs as the `docker-reference`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The reference as given: `oci://REGISTRY/REPO[:TAG][@DIGEST]`.
    pub fn display(&self) -> String {
        let mut s = format!("{SCHEME}{}", self.name());
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }

    /// `oci://REGISTRY/REPO@DIGEST`: what an install record pins.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{SCHEME}{}@{digest}", self.name())
    }

    /// What to ask the registry for: the digest if named, else the tag.
    pub fn target(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same repository at another tag (the signature's `sha256-HEX.sig`).
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        }
    }

    /// The host part without the port (brackets removed for IPv6).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// Plain HTTP is used for loopback registries only; every other registry is HTTPS.
    pub fn base_url(&self) -> String {
        let host = if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        };
        let scheme = if is_loopback(self.host()) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{host}")
    }
}

/// The host of `host[:port]` (`[::1]:5000` → `::1`).
pub fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// `localhost`, 127.0.0.0/8 or ::1.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| match ip {
            IpAddr::V4(v4) => v4.is_loopback(),
            IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback())
            }
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tags_digests_and_ports_parse() {
        let r = Reference::parse("oci://127.0.0.1:5000/team/wc:v1").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/wc");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.base_url(), "http://127.0.0.1:5000");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/x/wc@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert_eq!(r.base_url(), "https://ghcr.io");
        assert_eq!(r.pinned(&d), format!("oci://ghcr.io/x/wc@{d}"));
        let r = Reference::parse("oci://[::1]:5000/wc:latest").unwrap();
        assert_eq!(r.host(), "::1");
        assert!(r.base_url().starts_with("http://"));
    }

    #[test]
    fn bad_references_say_what_to_write() {
        for bad in [
            "oci://localhost:5000/wc",
            "oci://wc:v1",
            "oci://localhost/Upper:v1",
            "oci://localhost/wc@sha256:abc",
            "oci://localhost/wc:-x",
            "https://localhost/wc:v1",
        ] {
            let e = Reference::parse(bad).unwrap_err();
            assert!(e.contains("oci://REGISTRY/REPO:TAG"), "{bad}: {e}");
        }
    }

    #[test]
    fn only_loopback_is_plain_http() {
        for h in ["localhost", "127.0.0.1", "127.8.9.1", "::1"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "10.0.0.1",
            "example.com",
            "localhost.example.com",
            "0.0.0.0",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
