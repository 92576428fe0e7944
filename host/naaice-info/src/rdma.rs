//! The RDMA side of the machine: whether rdma-core loads, and the RDMA devices as sysfs
//! shows them (`/sys/class/infiniband/<device>/`: node GUID, each port's state and link
//! layer, the non-zero GIDs with their type and network device), with the addresses of those
//! network devices (from `ip -j addr`, where `ip` exists, and from IPv4-mapped GIDs).

use std::fs;
use std::net::Ipv6Addr;
use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Where the kernel lists the RDMA devices.
pub(crate) const SYSFS: &str = "/sys/class/infiniband";

/// What this machine offers the verbs transport.
#[derive(Debug, Serialize)]
pub(crate) struct Rdma {
    /// Whether rdma-core's libraries (`libibverbs.so.1`, `librdmacm.so.1`) are loaded.
    pub rdma_core_loaded: bool,
    /// Why they are not (or that this build has no verbs transport).
    pub rdma_core_error: Option<String>,
    /// The device names libibverbs reports (`None` when it could not be asked).
    pub verbs_devices: Option<Vec<String>>,
    /// The sysfs folder read.
    pub sysfs: String,
    /// Why sysfs lists no devices, when it could not be read.
    pub sysfs_error: Option<String>,
    /// The devices sysfs lists.
    pub devices: Vec<Device>,
    /// The addresses of the network devices the GIDs belong to.
    pub netdevs: Vec<Netdev>,
    /// Why the verbs transport cannot be used here (`None`: it can be tried).
    pub verbs_unusable: Option<String>,
    /// The locked-memory limit, which verbs registrations count against.
    pub memlock: Memlock,
}

/// Where the kernel shows this process's resource limits.
pub(crate) const PROC_LIMITS: &str = "/proc/self/limits";

/// The locked-memory limit below which [`Memlock::warning`] says to raise it: registering
/// regions over verbs pins them, and a few MiB (a common default) do not hold one large
/// region.
pub(crate) const MEMLOCK_NEEDED: u64 = 64 << 20;

/// The locked-memory limit (`ulimit -l`, `RLIMIT_MEMLOCK`).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Memlock {
    /// The soft limit in bytes, what applies (`None`: unlimited, or unknown).
    pub soft_bytes: Option<u64>,
    /// The hard limit in bytes, up to which a process may raise it (`None`: unlimited, or
    /// unknown).
    pub hard_bytes: Option<u64>,
    /// Why the limit is too low for verbs and how to raise it.
    pub warning: Option<String>,
    /// Why the limit is unknown.
    pub error: Option<String>,
}

impl Memlock {
    /// Reads the limit from a `/proc/PID/limits` file.
    pub(crate) fn read(limits: &Path) -> Self {
        let unknown = |error: String| Self {
            soft_bytes: None,
            hard_bytes: None,
            warning: None,
            error: Some(error),
        };
        let text = match fs::read_to_string(limits) {
            Ok(t) => t,
            Err(e) => return unknown(format!("cannot read {}: {e}", limits.display())),
        };
        let Some(line) = text
            .lines()
            .find_map(|l| l.strip_prefix("Max locked memory"))
        else {
            return unknown(format!(
                "{} has no \"Max locked memory\" line",
                limits.display()
            ));
        };
        let mut fields = line.split_whitespace();
        let limit = |f: Option<&str>| -> Result<Option<u64>, String> {
            match f {
                Some("unlimited") => Ok(None),
                Some(n) => n
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("unexpected limit {n:?}")),
                None => Err("missing limit".into()),
            }
        };
        let (soft, hard) = match (limit(fields.next()), limit(fields.next())) {
            (Ok(s), Ok(h)) => (s, h),
            (Err(e), _) | (_, Err(e)) => return unknown(format!("{}: {e}", limits.display())),
        };
        let warning = soft.filter(|&s| s < MEMLOCK_NEEDED).map(|s| {
            let raise = match hard {
                None => "raise it with `ulimit -l unlimited` in the job script, or for good \
                         with"
                    .to_owned(),
                Some(h) if h > s => format!(
                    "raise it with `ulimit -l {}` (the hard limit) in the job script, or for \
                     good with",
                    h / 1024
                ),
                Some(_) => "the hard limit is no higher, so an administrator must raise both \
                            with"
                    .to_owned(),
            };
            format!(
                "{} is too low for verbs (registering regions pins them; at least {} \
                 advised): {raise} memlock in /etc/security/limits.conf, \
                 LimitMEMLOCK=infinity for systemd services (slurmd), --ulimit memlock=-1 for \
                 containers",
                naaice::units::size(s),
                naaice::units::size(MEMLOCK_NEEDED)
            )
        });
        Self {
            soft_bytes: soft,
            hard_bytes: hard,
            warning,
            error: None,
        }
    }
}

/// One RDMA device.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Device {
    /// Its name (e.g. `mlx5_0`, `rxe0`).
    pub name: String,
    /// Its node GUID.
    pub node_guid: Option<String>,
    /// Its ports.
    pub ports: Vec<Port>,
}

/// One port of an RDMA device.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Port {
    /// The port number (from 1).
    pub number: u32,
    /// Its state (e.g. `ACTIVE`, `DOWN`).
    pub state: Option<String>,
    /// Its link layer (`Ethernet` for RoCE, `InfiniBand`).
    pub link_layer: Option<String>,
    /// Its active MTU in bytes: the port's `active_mtu` where the driver shows it, else for
    /// RoCE the largest RDMA MTU its network device's MTU carries.
    pub active_mtu: Option<u32>,
    /// Where [`Port::active_mtu`] came from (`active_mtu`, or `netdev NAME mtu N`).
    pub mtu_source: Option<String>,
    /// Its link speed (`rate`, e.g. `100 Gb/sec (4X EDR)`).
    pub rate: Option<String>,
    /// The non-zero GIDs.
    pub gids: Vec<Gid>,
}

/// One GID table entry.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Gid {
    /// The table index.
    pub index: u32,
    /// The GID as an IPv6 address.
    pub gid: String,
    /// Its type (`RoCE v2`, `IB/RoCE v1`), where sysfs tells.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The network device it belongs to (RoCE).
    pub netdev: Option<String>,
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub ipv4: Option<String>,
}

/// The addresses of a network device.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Netdev {
    /// Its name.
    pub name: String,
    /// Its addresses with prefix length (`10.0.0.5/24`).
    pub addresses: Vec<String>,
    /// Why the addresses are unknown.
    pub error: Option<String>,
}

impl Rdma {
    /// Looks at this machine.
    pub(crate) fn current() -> Self {
        let (rdma_core_loaded, rdma_core_error, verbs_devices) = rdma_core();
        let (devices, sysfs_error) = match devices(Path::new(SYSFS)) {
            Ok(d) => (d, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let mut names: Vec<&str> = devices
            .iter()
            .flat_map(|d| &d.ports)
            .flat_map(|p| &p.gids)
            .filter_map(|g| g.netdev.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        let netdevs = names.into_iter().map(netdev).collect();
        Self {
            rdma_core_loaded,
            rdma_core_error,
            verbs_devices,
            sysfs: SYSFS.into(),
            sysfs_error,
            devices,
            netdevs,
            verbs_unusable: naaice::transport::auto::verbs_unusable(),
            memlock: Memlock::read(Path::new(PROC_LIMITS)),
        }
    }
}

/// rdma-core's state: loaded, why not, and libibverbs' device names.
#[cfg(feature = "verbs")]
fn rdma_core() -> (bool, Option<String>, Option<Vec<String>>) {
    use naaice::transport::verbs;
    match verbs::rdma_core_check() {
        Ok(()) => match verbs::device_names() {
            Ok(names) => (true, None, Some(names)),
            Err(e) => (true, None, Some(vec![format!("(error: {e})")])),
        },
        Err(e) => (false, Some(e.to_string()), None),
    }
}

/// Without the verbs transport, rdma-core is not looked for.
#[cfg(not(feature = "verbs"))]
fn rdma_core() -> (bool, Option<String>, Option<Vec<String>>) {
    let why = "not checked: this build has no verbs transport (cargo feature `verbs`)";
    (false, Some(why.into()), None)
}

/// Reads the devices under `root` (a `/sys/class/infiniband` tree), sorted by name.
pub(crate) fn devices(root: &Path) -> Result<Vec<Device>, String> {
    let list = fs::read_dir(root).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{} does not exist (no RDMA driver is loaded: an RDMA NIC's driver, or rdma_rxe \
             for Soft-RoCE)",
            root.display()
        ),
        _ => format!("cannot read {}: {e}", root.display()),
    })?;
    // The network devices are beside the RDMA devices: /sys/class/net.
    let net = root.with_file_name("net");
    let mut devices: Vec<Device> = list
        .filter_map(Result::ok)
        .map(|d| {
            let dir = d.path();
            Device {
                name: d.file_name().to_string_lossy().into_owned(),
                node_guid: read(&dir.join("node_guid")),
                ports: numbered(&dir.join("ports"))
                    .into_iter()
                    .map(|n| port(&dir.join("ports").join(n.to_string()), n, &net))
                    .collect(),
            }
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(devices)
}

/// One port's state, link layer, MTU, speed and non-zero GIDs; `net` is the folder of the
/// network devices (`/sys/class/net`).
fn port(dir: &Path, number: u32, net: &Path) -> Port {
    let gids = numbered(&dir.join("gids"))
        .into_iter()
        .filter_map(|index| {
            let text = read(&dir.join("gids").join(index.to_string()))?;
            let addr: Ipv6Addr = text.parse().ok()?;
            if addr.is_unspecified() {
                return None;
            }
            let attr = |what: &str| read(&dir.join("gid_attrs").join(what).join(index.to_string()));
            Some(Gid {
                index,
                gid: addr.to_string(),
                kind: attr("types"),
                netdev: attr("ndevs"),
                ipv4: addr.to_ipv4_mapped().map(|v4| v4.to_string()),
            })
        })
        .collect::<Vec<Gid>>();
    let link_layer = read(&dir.join("link_layer"));
    let (active_mtu, mtu_source) = match read(&dir.join("active_mtu")) {
        // "4096" or "4096 (5)".
        Some(text) => (
            text.split_whitespace().next().and_then(|n| n.parse().ok()),
            Some("active_mtu".to_owned()),
        ),
        None if link_layer.as_deref() == Some("Ethernet") => gids
            .iter()
            .find_map(|g| {
                let name = g.netdev.as_deref()?;
                let mtu: u32 = read(&net.join(name).join("mtu"))?.parse().ok()?;
                Some((roce_mtu(mtu), Some(format!("netdev {name} mtu {mtu}"))))
            })
            .unwrap_or((None, None)),
        None => (None, None),
    };
    Port {
        number,
        active_mtu,
        mtu_source,
        rate: read(&dir.join("rate")),
        // "4: ACTIVE" → "ACTIVE".
        state: read(&dir.join("state")).map(|s| match s.split_once(": ") {
            Some((_, name)) => name.to_owned(),
            None => s,
        }),
        link_layer,
        gids,
    }
}

/// The RDMA MTU of RoCE over a network device of MTU `mtu`: the largest of 256 to 4096 bytes
/// that fits with the RoCEv2 headers (IP, UDP, BTH, extended headers, ICRC: 96 bytes, as the
/// kernel's `iboe_get_mtu`); `None` below 256.
fn roce_mtu(mtu: u32) -> Option<u32> {
    let payload = mtu.saturating_sub(96);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= payload)
}

/// The numeric entries of a folder, sorted (none when it cannot be read).
fn numbered(dir: &Path) -> Vec<u32> {
    let mut numbers: Vec<u32> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    numbers.sort_unstable();
    numbers
}

/// A sysfs attribute, trimmed; `None` when it cannot be read or is empty (the kernel
/// refuses to read the type of an unused GID entry).
fn read(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The addresses of network device `name`, from `ip -j addr show dev NAME`.
fn netdev(name: &str) -> Netdev {
    let output = Command::new("ip")
        .args(["-j", "addr", "show", "dev", name])
        .output();
    let (addresses, error) = match output {
        Ok(out) if out.status.success() => match ip_addresses(&out.stdout) {
            Ok(a) => (a, None),
            Err(e) => (Vec::new(), Some(e)),
        },
        Ok(out) => (
            Vec::new(),
            Some(format!(
                "ip addr failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        ),
        Err(e) => (Vec::new(), Some(format!("cannot run ip: {e}"))),
    };
    Netdev {
        name: name.to_owned(),
        addresses,
        error,
    }
}

/// The addresses in `ip -j addr` output (`local/prefixlen` of every `addr_info`).
pub(crate) fn ip_addresses(json: &[u8]) -> Result<Vec<String>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("unexpected ip -j output: {e}"))?;
    let mut addresses = Vec::new();
    for link in value.as_array().into_iter().flatten() {
        for info in link["addr_info"].as_array().into_iter().flatten() {
            if let Some(local) = info["local"].as_str() {
                addresses.push(match info["prefixlen"].as_u64() {
                    Some(len) => format!("{local}/{len}"),
                    None => local.to_owned(),
                });
            }
        }
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/sys/class/infiniband` with one RoCE device: port 1 active with a link-local
    /// GID, an IPv4-mapped GID and zero entries.
    #[test]
    fn reads_a_sysfs_tree() {
        let top = std::env::temp_dir().join(format!("naaice-info-sysfs-{}", std::process::id()));
        let root = top.join("infiniband");
        let port = root.join("rxe0/ports/1");
        for dir in ["gids", "gid_attrs/types", "gid_attrs/ndevs"] {
            fs::create_dir_all(port.join(dir)).unwrap();
        }
        let write = |path: &str, text: &str| fs::write(port.join(path), text).unwrap();
        fs::write(root.join("rxe0/node_guid"), "0a00:27ff:fe3c:1b8a\n").unwrap();
        write("state", "4: ACTIVE\n");
        write("link_layer", "Ethernet\n");
        write("rate", "100 Gb/sec (4X EDR)\n");
        fs::create_dir_all(root.join("../net/eth1")).unwrap();
        fs::write(root.join("../net/eth1/mtu"), "9000\n").unwrap();
        write("gids/0", "fe80:0000:0000:0000:0a00:27ff:fe3c:1b8a\n");
        write("gids/1", "0000:0000:0000:0000:0000:ffff:0a00:0005\n");
        write("gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n");
        write("gid_attrs/types/0", "RoCE v2\n");
        write("gid_attrs/types/1", "RoCE v2\n");
        write("gid_attrs/ndevs/0", "eth1\n");
        write("gid_attrs/ndevs/1", "eth1\n");
        let devices = devices(&root);
        fs::remove_dir_all(&top).unwrap();
        let devices = devices.unwrap();
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert_eq!(
            (d.name.as_str(), d.node_guid.as_deref()),
            ("rxe0", Some("0a00:27ff:fe3c:1b8a"))
        );
        let p = &d.ports[0];
        assert_eq!(
            (p.number, p.state.as_deref(), p.link_layer.as_deref()),
            (1, Some("ACTIVE"), Some("Ethernet"))
        );
        assert_eq!(
            (p.active_mtu, p.mtu_source.as_deref(), p.rate.as_deref()),
            (
                Some(4096),
                Some("netdev eth1 mtu 9000"),
                Some("100 Gb/sec (4X EDR)")
            )
        );
        assert_eq!(
            p.gids,
            [
                Gid {
                    index: 0,
                    gid: "fe80::a00:27ff:fe3c:1b8a".into(),
                    kind: Some("RoCE v2".into()),
                    netdev: Some("eth1".into()),
                    ipv4: None,
                },
                Gid {
                    index: 1,
                    gid: "::ffff:10.0.0.5".into(),
                    kind: Some("RoCE v2".into()),
                    netdev: Some("eth1".into()),
                    ipv4: Some("10.0.0.5".into()),
                },
            ]
        );
    }

    /// An InfiniBand port with the driver's `active_mtu`, a port without MTU or speed, and
    /// the RoCE MTUs of common network MTUs.
    #[test]
    fn port_mtu_and_speed() {
        let top = std::env::temp_dir().join(format!("naaice-info-ports-{}", std::process::id()));
        let root = top.join("infiniband");
        let ib = root.join("mlx5_0/ports/1");
        fs::create_dir_all(&ib).unwrap();
        fs::create_dir_all(root.join("mlx5_0/ports/2")).unwrap();
        fs::write(ib.join("active_mtu"), "4096 (5)\n").unwrap();
        fs::write(ib.join("rate"), "200 Gb/sec (4X HDR)\n").unwrap();
        fs::write(ib.join("link_layer"), "InfiniBand\n").unwrap();
        let devices = devices(&root);
        fs::remove_dir_all(&top).unwrap();
        let ports = &devices.unwrap()[0].ports;
        assert_eq!(
            (
                ports[0].active_mtu,
                ports[0].mtu_source.as_deref(),
                ports[0].rate.as_deref()
            ),
            (Some(4096), Some("active_mtu"), Some("200 Gb/sec (4X HDR)"))
        );
        assert_eq!(
            (ports[1].active_mtu, ports[1].rate.as_deref()),
            (None, None)
        );
        assert_eq!(roce_mtu(1500), Some(1024));
        assert_eq!(roce_mtu(9000), Some(4096));
        assert_eq!(roce_mtu(2200), Some(2048));
        assert_eq!(roce_mtu(300), None);
    }

    /// `ulimit -l` from a limits file: a low one says how to raise it, unlimited none.
    #[test]
    fn memlock_from_a_limits_file() {
        let path = std::env::temp_dir().join(format!("naaice-info-limits-{}", std::process::id()));
        let header = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        let cases = [
            (
                "8388608              8388608",
                Some(8 << 20),
                Some(8 << 20),
                Some("an administrator must raise both"),
            ),
            (
                "65536                unlimited",
                Some(65536),
                None,
                Some("`ulimit -l unlimited`"),
            ),
            (
                "8388608              1073741824",
                Some(8 << 20),
                Some(1 << 30),
                Some("`ulimit -l 1048576` (the hard limit)"),
            ),
            ("unlimited            unlimited", None, None, None),
            (
                "1073741824           1073741824",
                Some(1 << 30),
                Some(1 << 30),
                None,
            ),
        ];
        for (limits, soft, hard, advice) in cases {
            fs::write(
                &path,
                format!("{header}Max locked memory         {limits}            bytes\n"),
            )
            .unwrap();
            let m = Memlock::read(&path);
            assert_eq!(
                (m.soft_bytes, m.hard_bytes, &m.error),
                (soft, hard, &None),
                "{limits}"
            );
            match advice {
                Some(advice) => {
                    let w = m.warning.unwrap();
                    assert!(w.contains("too low for verbs") && w.contains(advice), "{w}");
                }
                None => assert_eq!(m.warning, None),
            }
        }
        fs::write(&path, header).unwrap();
        assert!(
            Memlock::read(&path)
                .error
                .unwrap()
                .contains("Max locked memory")
        );
        fs::remove_file(&path).unwrap();
        assert!(Memlock::read(&path).error.unwrap().contains("cannot read"));
    }

    #[test]
    fn a_missing_sysfs_folder_says_why() {
        let err = devices(Path::new("/nonexistent/infiniband")).unwrap_err();
        assert!(err.contains("no RDMA driver"), "{err}");
    }

    #[test]
    fn parses_ip_json() {
        let json = br#"[{"ifindex":3,"ifname":"eth1","addr_info":[
            {"family":"inet","local":"10.0.0.5","prefixlen":24},
            {"family":"inet6","local":"fe80::1","prefixlen":64}]}]"#;
        assert_eq!(ip_addresses(json).unwrap(), ["10.0.0.5/24", "fe80::1/64"]);
        assert!(ip_addresses(b"not json").is_err());
    }
}
