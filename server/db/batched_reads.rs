//! Reads by key, gathered: under load, the reads that arrive while others are in flight go to
//! PostgreSQL together, as one statement over all their keys (`WHERE id = ANY($1)`).
//!
//! Why: a point read costs PostgreSQL little; the round trip around it (a wake-up of a backend
//! process, two loopback hops) is most of it. Gathering turns 64 concurrent reads into a few
//! statements, and the API spends its time on HTTP instead of on waiting for PostgreSQL.
//!
//! Nothing is served stale: a read joins only a statement that has not been sent yet, so every
//! read sees at least what was committed before it arrived (read-your-writes, on any replica).
//! When nothing else is in flight a read goes out alone at once, so a quiet server answers as
//! fast as with a read of its own.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::Instrument;

/// How many gathered statements may be in flight at once. Each holds a pool connection; more
/// would only split the same reads into smaller statements.
pub const IN_FLIGHT: usize = 2;
/// The most keys in one statement; the rest go in the next.
const MOST_KEYS: usize = 256;

type Fetched<K, V> = Result<HashMap<K, V>, sqlx::Error>;
type Fetch<K, V> = Arc<dyn Fn(Vec<K>) -> Pin<Box<dyn Future<Output = Fetched<K, V>> + Send>> + Send + Sync>;
type Reply<V> = oneshot::Sender<Result<Option<V>, Arc<sqlx::Error>>>;
/// A read: its key, where its answer goes, and the span of the request that asked.
type Request<K, V> = (K, Reply<V>, tracing::Span);

/// A handle for reads by key; clones share one gatherer. The gatherer ends with its last handle.
pub struct BatchedReads<K, V> {
    requests: mpsc::UnboundedSender<Request<K, V>>,
}

impl<K, V> Clone for BatchedReads<K, V> {
    fn clone(&self) -> Self {
        BatchedReads { requests: self.requests.clone() }
    }
}

impl<K, V> BatchedReads<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Starts a gatherer that reads with `fetch`: the values found for a set of distinct keys
    /// (a key without a value is reported as not found). Needs a Tokio runtime.
    pub fn start<F, Fut>(fetch: F) -> Self
    where
        F: Fn(Vec<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Fetched<K, V>> + Send + 'static,
    {
        let fetch: Fetch<K, V> = Arc::new(move |keys| Box::pin(fetch(keys)));
        let (requests, received) = mpsc::unbounded_channel();
        tokio::spawn(dispatch(received, fetch));
        BatchedReads { requests }
    }

    /// The value for `key`, `None` if there is none.
    pub async fn get(&self, key: K) -> Result<Option<V>, Arc<sqlx::Error>> {
        let (reply, answer) = oneshot::channel();
        let gone = || Arc::new(sqlx::Error::PoolClosed);
        self.requests.send((key, reply, tracing::Span::current())).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Takes the waiting reads as soon as a statement may go out, and sends them as one.
async fn dispatch<K, V>(mut received: mpsc::UnboundedReceiver<Request<K, V>>, fetch: Fetch<K, V>)
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = received.recv().await {
        let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
        // Everything that arrived while waiting for a free slot goes in this statement.
        let mut batch = vec![first];
        while batch.len() < MOST_KEYS {
            match received.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let fetch = fetch.clone();
        // The statement is traced in the span of the first read's request.
        let span = batch[0].2.clone();
        let statement = async move {
            let keys: HashSet<K> = batch.iter().map(|(key, ..)| key.clone()).collect();
            match fetch(keys.into_iter().collect()).await {
                Ok(found) => {
                    for (key, reply, _) in batch {
                        let _ = reply.send(Ok(found.get(&key).cloned()));
                    }
                }
                Err(e) => {
                    let e = Arc::new(e);
                    for (_, reply, _) in batch {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
            drop(permit);
        };
        tokio::spawn(statement.instrument(span));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::*;

    /// A fetch that records the keys of each call and waits for a go-ahead (a permit) per call.
    #[derive(Clone)]
    struct Recorder {
        calls: Arc<Mutex<Vec<Vec<u32>>>>,
        go: Arc<Semaphore>,
    }

    impl Default for Recorder {
        fn default() -> Self {
            Recorder { calls: Default::default(), go: Arc::new(Semaphore::new(0)) }
        }
    }

    type Answer = tokio::task::JoinHandle<Result<Option<String>, Arc<sqlx::Error>>>;

    /// A read of `key`, running on its own.
    fn spawn_get(reads: &BatchedReads<u32, String>, key: u32) -> Answer {
        let reads = reads.clone();
        tokio::spawn(async move { reads.get(key).await })
    }

    impl Recorder {
        fn gatherer(&self) -> BatchedReads<u32, String> {
            let this = self.clone();
            BatchedReads::start(move |mut keys: Vec<u32>| {
                let this = this.clone();
                async move {
                    keys.sort();
                    this.calls.lock().unwrap().push(keys.clone());
                    this.go.acquire().await.expect("open").forget();
                    if keys.contains(&666) {
                        return Err(sqlx::Error::Protocol("bad key".into()));
                    }
                    Ok(keys.into_iter().filter(|k| k % 2 == 0).map(|k| (k, format!("value {k}"))).collect())
                }
            })
        }

        async fn calls_reach(&self, n: usize) -> Vec<Vec<u32>> {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let calls = self.calls.lock().unwrap().clone();
                if calls.len() >= n {
                    return calls;
                }
                assert!(Instant::now() < deadline, "{n} fetches expected, saw {calls:?}");
                tokio::task::yield_now().await;
            }
        }
    }

    #[tokio::test]
    async fn reads_waiting_for_a_free_slot_go_out_together_once_per_key() {
        let recorder = Recorder::default();
        let reads = recorder.gatherer();
        // Two reads take both slots, one after the other, and wait there.
        let mut first = Vec::new();
        for (n, key) in [2, 4].into_iter().enumerate() {
            first.push(spawn_get(&reads, key));
            recorder.calls_reach(n + 1).await;
        }
        let waiting: Vec<Answer> = [6, 7, 6, 8].map(|k| spawn_get(&reads, k)).into();
        // The runtime is single-threaded: the waiting reads are queued before this task goes on.
        tokio::task::yield_now().await;
        // Every fetch may go now.
        recorder.go.add_permits(16);
        let mut answers = Vec::new();
        for handle in first.into_iter().chain(waiting) {
            answers.push(handle.await.unwrap().unwrap());
        }
        assert_eq!(
            answers,
            [Some("value 2"), Some("value 4"), Some("value 6"), None, Some("value 6"), Some("value 8")]
                .map(|a| a.map(String::from))
        );
        let calls = recorder.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 3, "the four waiting reads are one fetch: {calls:?}");
        assert_eq!(calls[2], vec![6, 7, 8], "each key once");
    }

    #[tokio::test]
    async fn a_read_never_joins_a_fetch_already_sent() {
        let recorder = Recorder::default();
        let reads = recorder.gatherer();
        let early = spawn_get(&reads, 2);
        recorder.calls_reach(1).await;
        let late = spawn_get(&reads, 2);
        // The late read goes out in a fetch of its own, after the early one was sent.
        let calls = recorder.calls_reach(2).await;
        assert_eq!(calls, vec![vec![2], vec![2]]);
        recorder.go.add_permits(2);
        assert_eq!(early.await.unwrap().unwrap().as_deref(), Some("value 2"));
        assert_eq!(late.await.unwrap().unwrap().as_deref(), Some("value 2"));
    }

    #[tokio::test]
    async fn a_failed_fetch_fails_every_read_in_it_and_not_the_next() {
        let recorder = Recorder::default();
        let reads = recorder.gatherer();
        let failing = spawn_get(&reads, 666);
        recorder.calls_reach(1).await;
        recorder.go.add_permits(1);
        let error = failing.await.unwrap().unwrap_err();
        assert!(error.to_string().contains("bad key"), "{error}");
        let next = spawn_get(&reads, 4);
        recorder.calls_reach(2).await;
        recorder.go.add_permits(1);
        assert_eq!(next.await.unwrap().unwrap().as_deref(), Some("value 4"));
    }
}
