//! CPU enforcement: one cgroup per provisioned CPU reservation,
//! `braid/res-<id>` under the `cpu` controller's mount, with a quota of the
//! reserved CPUs and a high weight, and the reserved process moved in.
//!
//! [`Cgroups::detect`] reads `/proc/self/mountinfo`: a cgroup v1 hierarchy
//! with the `cpu` controller (`cpu.cfs_quota_us`, `cpu.cfs_period_us`,
//! `cpu.shares`), else the v2 unified hierarchy (`cpu.max`, `cpu.weight`,
//! with `+cpu` enabled in `cgroup.subtree_control` on the way down). The
//! quota caps the process at its reservation (admission keeps the sum of
//! reservations within the resource, as a link's classes are); the weight
//! ([`WEIGHT_BOOST`] times a plain task's per reserved CPU) lets it take that
//! much when unreserved tasks compete — a quota alone is only a ceiling.
//! Release moves the processes back to the hierarchy's root and removes the
//! group; at start the broker removes every `res-<id>` no longer
//! provisioned ([`Cgroups::listed`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use braid_core::ReservationId;

/// The cgroup under which the broker makes its groups.
pub const PARENT: &str = "braid";
/// The CFS period, in microseconds (the kernel's default).
pub const PERIOD_US: u64 = 100_000;
/// The least quota the kernel accepts, in microseconds.
pub const MIN_QUOTA_US: u64 = 1_000;
/// A reserved CPU weighs as much as this many busy unreserved tasks.
pub const WEIGHT_BOOST: f64 = 16.0;

/// A cgroup failure, in one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// No `cpu` controller is mounted.
    #[error("no cgroup with the cpu controller in /proc/self/mountinfo (neither v1 `cpu` nor v2 with cpu): CPU reservations cannot be enforced")]
    NoController,
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The process to move does not exist.
    #[error("process {0} does not exist")]
    NoProcess(u32),
}

/// Which cgroup interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// v1: a hierarchy with the `cpu` controller.
    V1,
    /// v2: the unified hierarchy.
    V2,
}

/// The broker's cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    root: PathBuf,
    version: Version,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CpuError + '_ {
    move |source| CpuError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, text: &str) -> Result<(), CpuError> {
    std::fs::write(path, text).map_err(io(path))
}

/// Where the `cpu` controller is mounted, from mountinfo `text`: a v1
/// hierarchy with `cpu` first, else a v2 one.
pub fn from_mountinfo(text: &str) -> Option<(PathBuf, Version)> {
    let mut v2 = None;
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = left.split_whitespace().nth(4) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fstype, _source, options) = (r.next(), r.next(), r.next().unwrap_or(""));
        match fstype {
            Some("cgroup") if options.split(',').any(|o| o == "cpu") => {
                return Some((PathBuf::from(mount), Version::V1))
            }
            Some("cgroup2") if v2.is_none() => v2 = Some(PathBuf::from(mount)),
            _ => {}
        }
    }
    v2.map(|m| (m, Version::V2))
}

impl Cgroups {
    /// Finds the `cpu` controller and makes the broker's parent group.
    ///
    /// # Errors
    /// [`CpuError::NoController`], or [`CpuError::Io`] when the parent
    /// cannot be made.
    pub fn detect() -> Result<Cgroups, CpuError> {
        let info = Path::new("/proc/self/mountinfo");
        let text = std::fs::read_to_string(info).map_err(io(info))?;
        let (root, version) = from_mountinfo(&text).ok_or(CpuError::NoController)?;
        let c = Cgroups { root, version };
        if version == Version::V2 {
            let controllers = c.root.join("cgroup.controllers");
            let have = std::fs::read_to_string(&controllers).map_err(io(&controllers))?;
            if !have.split_whitespace().any(|x| x == "cpu") {
                return Err(CpuError::NoController);
            }
            write(&c.root.join("cgroup.subtree_control"), "+cpu")?;
        }
        let parent = c.parent();
        if !parent.exists() {
            std::fs::create_dir(&parent).map_err(io(&parent))?;
        }
        if version == Version::V2 {
            write(&parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        Ok(c)
    }

    /// v1 or v2.
    pub fn version(&self) -> Version {
        self.version
    }

    /// `<mount>/braid`.
    pub fn parent(&self) -> PathBuf {
        self.root.join(PARENT)
    }

    /// The group of reservation `id`.
    pub fn group(&self, id: ReservationId) -> PathBuf {
        self.parent().join(format!("res-{}", id.0))
    }

    /// Creates (or updates) the group of `id` with `cpus` CPUs and moves
    /// `pid` into it.
    ///
    /// # Errors
    /// [`CpuError`].
    pub fn set(&self, id: ReservationId, cpus: f64, pid: u32) -> Result<(), CpuError> {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Err(CpuError::NoProcess(pid));
        }
        let g = self.group(id);
        if !g.exists() {
            std::fs::create_dir(&g).map_err(io(&g))?;
        }
        // Saturating float-to-int casts: a huge reservation is no quota
        // beyond what the kernel takes.
        let quota = ((cpus * PERIOD_US as f64).round() as u64).max(MIN_QUOTA_US);
        match self.version {
            Version::V1 => {
                write(&g.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(&g.join("cpu.cfs_quota_us"), &quota.to_string())?;
                let shares = ((cpus * 1024.0 * WEIGHT_BOOST).round() as u64).clamp(2, 262_144);
                write(&g.join("cpu.shares"), &shares.to_string())?;
            }
            Version::V2 => {
                write(&g.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
                let weight = ((cpus * 100.0 * WEIGHT_BOOST).round() as u64).clamp(1, 10_000);
                write(&g.join("cpu.weight"), &weight.to_string())?;
            }
        }
        write(&g.join("cgroup.procs"), &pid.to_string()).map_err(|e| match e {
            CpuError::Io { source, .. } if source.raw_os_error() == Some(3) => {
                CpuError::NoProcess(pid)
            }
            e => e,
        })
    }

    /// Moves the processes of `id`'s group back to the root and removes
    /// it (a group already gone is fine).
    ///
    /// # Errors
    /// [`CpuError::Io`].
    pub fn remove(&self, id: ReservationId) -> Result<(), CpuError> {
        let g = self.group(id);
        if !g.exists() {
            return Ok(());
        }
        let procs = g.join("cgroup.procs");
        let text = std::fs::read_to_string(&procs).map_err(io(&procs))?;
        let back = self.root.join("cgroup.procs");
        for pid in text.split_whitespace() {
            // A process that exited meanwhile is fine.
            let _ = std::fs::write(&back, pid);
        }
        std::fs::remove_dir(&g).map_err(io(&g))
    }

    /// The reservations that have a group now.
    ///
    /// # Errors
    /// [`CpuError::Io`].
    pub fn listed(&self) -> Result<BTreeSet<ReservationId>, CpuError> {
        let parent = self.parent();
        let dir = std::fs::read_dir(&parent).map_err(io(&parent))?;
        Ok(dir
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix("res-")?
                    .parse::<u64>()
                    .ok()
            })
            .map(ReservationId)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_v1_cpu_before_v2() {
        let v1 = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                  33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n\
                  32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                  40 31 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            from_mountinfo(v1),
            Some((PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"), Version::V1))
        );
        let v2 = "25 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            from_mountinfo(v2),
            Some((PathBuf::from("/sys/fs/cgroup"), Version::V2))
        );
        assert_eq!(from_mountinfo("1 2 0:1 / / rw - ext4 /dev/sda rw\n"), None);
    }
}
