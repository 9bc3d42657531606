//! PostgreSQL going down and coming back, for a server under test: a TCP proxy in front of the
//! test's database that the test can cut (every connection closed, new ones refused, as a
//! stopped server does) and restore on the same port.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::task::JoinHandle;

/// Where the database really is.
#[derive(Clone, Debug)]
enum Upstream {
    Tcp(String),
    Unix(std::path::PathBuf),
}

pub(crate) struct Outage {
    port: u16,
    upstream: Upstream,
    serving: Option<JoinHandle<()>>,
}

impl Outage {
    /// A proxy for the database of `url` (a `postgres://` URL of the test server, over TCP or a
    /// Unix socket), serving; answers it with the URL to give the server under test.
    pub(crate) async fn new(url: &str) -> (Outage, String) {
        let (rest, query) = url.split_once('?').map_or((url, None), |(r, q)| (r, Some(q)));
        let (scheme_user, host_db) = rest.rsplit_once('@').expect("a URL with a user");
        let (host, db) = host_db.split_once('/').expect("a URL with a database");
        let upstream = match query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("host="))) {
            Some(dir) => Upstream::Unix(std::path::Path::new(dir).join(".s.PGSQL.5432")),
            None => Upstream::Tcp(if host.contains(':') { host.to_owned() } else { format!("{host}:5432") }),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().expect("addr").port();
        let mut outage = Outage { port, upstream, serving: None };
        outage.serving = Some(tokio::spawn(serve(listener, outage.upstream.clone())));
        (outage, format!("{scheme_user}@127.0.0.1:{port}/{db}"))
    }

    /// The database goes down: every connection through the proxy closes, new ones are refused.
    pub(crate) fn cut(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }

    /// The database is back, on the same port.
    pub(crate) async fn restore(&mut self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(listener) => break listener,
                // The aborted listener's socket may take a moment to go.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        };
        self.serving = Some(tokio::spawn(serve(listener, self.upstream.clone())));
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Accepts and forwards until aborted; the connections are its tasks, aborted with it.
async fn serve(listener: TcpListener, upstream: Upstream) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((mut client, _)) = listener.accept().await else { continue };
        let upstream = upstream.clone();
        connections.spawn(async move {
            match upstream {
                Upstream::Tcp(addr) => {
                    if let Ok(mut server) = TcpStream::connect(addr).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }
                Upstream::Unix(path) => {
                    if let Ok(mut server) = UnixStream::connect(path).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
}
