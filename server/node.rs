//! This process as a node of the fleet: a stable id kept in the data directory, its version and
//! when it started.

use std::path::Path;
use std::time::Instant;

use chrono::{DateTime, Utc};
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node_id: String,
    pub version: &'static str,
    pub started_at: DateTime<Utc>,
    pub started: Instant,
}

impl NodeInfo {
    /// Reads the node id from `<data_dir>/node_id`, creating it on first start, so a restarted
    /// worker is the same node.
    pub fn load(data_dir: &Path) -> std::io::Result<NodeInfo> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = data_dir.join("node_id");
        let node_id = match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => text.trim().to_owned(),
            _ => {
                let id = format!("node-{}", &Uuid::new_v4().simple().to_string()[..12]);
                let tmp = data_dir.join("node_id.tmp");
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)?
                    .write_all(id.as_bytes())?;
                std::fs::rename(&tmp, &path)?;
                id
            }
        };
        Ok(NodeInfo { node_id, version: env!("CARGO_PKG_VERSION"), started_at: Utc::now(), started: Instant::now() })
    }

    pub fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}
