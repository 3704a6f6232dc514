//! The HTTP client the OTLP exporters send with: hyper on a thread of its own.

use super::*;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::sync::Arc;

/// One request for the sender thread.
struct Job {
    request: Request<Bytes>,
    reply: tokio::sync::oneshot::Sender<Result<Response<Bytes>, String>>,
}

/// The HTTP client the OTLP exporters send with: requests go to a thread of its own running a
/// single-threaded runtime with hyper (HTTP/1.1; TLS with the webpki roots for https), so the
/// SDK's exporter threads need no runtime and no caller's runtime is touched.
#[derive(Debug)]
pub(super) struct Transport {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl Transport {
    pub(super) fn start() -> Result<Transport, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the sender's runtime: {e}"))?;
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("toolgate-otlp".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = rx.recv().await {
                        tokio::spawn(async move {
                            let answer = tokio::time::timeout(REQUEST_TIMEOUT, post(job.request))
                                .await
                                .unwrap_or_else(|_| {
                                    Err(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))
                                });
                            let _ = job.reply.send(answer);
                        });
                    }
                })
            })
            .map_err(|e| format!("cannot start the sender thread: {e}"))?;
        Ok(Transport { jobs })
    }
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Job { request, reply })
            .map_err(|_| "the OTLP sender thread has stopped")?;
        match answer.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err("the OTLP sender thread has stopped".into()),
        }
    }
}

/// Most response-body bytes read from the collector.
const MAX_RESPONSE: usize = 4 << 20;

async fn post(request: Request<Bytes>) -> Result<Response<Bytes>, String> {
    let uri = request.uri().clone();
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or("the endpoint names no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect ({e})"))?;
    let _ = tcp.set_nodelay(true);
    let (mut parts, body) = request.into_parts();
    parts.uri = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|e| format!("bad request path: {e}"))?;
    if let Some(authority) = uri.authority() {
        if let Ok(v) = http::HeaderValue::from_str(authority.as_str()) {
            parts.headers.entry(http::header::HOST).or_insert(v);
        }
    }
    let request = Request::from_parts(parts, http_body_util::Full::new(body));
    if https {
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| format!("bad host name for TLS: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS failed ({e})"))?;
        exchange(stream, request).await
    } else {
        exchange(tcp, request).await
    }
}

/// The client TLS configuration every outgoing host connection uses (web PKI roots, ring),
/// built once: the OTLP exporter and the OCI registry client.
pub(crate) fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| format!("cannot set up TLS ({e})"))
        })
        .clone()
}

async fn exchange<S>(
    stream: S,
    request: Request<http_body_util::Full<Bytes>>,
) -> Result<Response<Bytes>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use http_body_util::BodyExt;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake failed ({e})"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("the request failed ({e})"))?;
    let (parts, body) = response.into_parts();
    let body = http_body_util::Limited::new(body, MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed ({e})"))?
        .to_bytes();
    Ok(Response::from_parts(parts, body))
}
