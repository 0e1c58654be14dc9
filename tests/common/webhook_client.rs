//! A test client of the webhook: one HTTP/1.1 connection over TLS to a started server,
//! trusting its self-signed CA, reused for every review.

use celgate::app::Running;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value as Json;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// One HTTP/1.1 connection to the webhook, reused for every review.
pub struct Webhook {
    pub sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    pub port: u16,
}

impl Webhook {
    pub async fn connect(server: &Running) -> Webhook {
        let cfg = super::serve::client_tls(server.ca_pem.as_ref().unwrap(), b"", None);
        let addr = server.bound.webhook;
        let tcp = TcpStream::connect(addr).await.unwrap();
        let tls = TlsConnector::from(cfg)
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        Webhook {
            sender,
            port: addr.port(),
        }
    }

    /// Sends the review and returns its `response`.
    pub async fn review(&mut self, review: Json) -> Json {
        let req = hyper::Request::builder()
            .method("POST")
            .uri(format!("https://localhost:{}/validate", self.port))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(review.to_string())))
            .unwrap();
        self.sender.ready().await.unwrap();
        let resp = self.sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let answer: Json = serde_json::from_slice(&body).unwrap();
        answer["response"].clone()
    }
}
