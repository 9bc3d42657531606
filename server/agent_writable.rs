//! Files the server writes or reads in a directory an agent can write: the agent's own
//! directory under the data directory, its clone, a team's clone.
//!
//! Between two spawns an agent can put anything there, from its pane or through a committed
//! branch: a symbolic link to a file the server's user may write or read, a directory or a fifo
//! where a file is expected. So a path there is opened one component at a time beneath the
//! directory, never through a link (`O_NOFOLLOW` on every component), and its type is checked
//! before and after opening; a file is written whole under a fresh name and renamed over the
//! old one, which replaces a link and never writes through it. A link, a directory or a device
//! where a file is expected is refused with an error that names it.
//!
//! The directory itself ([`AgentWritable::open`]) is the server's: made by it, in a directory no
//! agent can write (`<data_dir>/clones`, `<data_dir>/agents`, …), so its own path is trusted.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The most read from one file: what the server reads there are small settings files.
const MAX_READ: u64 = 4 << 20;

/// A directory an agent can write, opened once; every path given to it is relative to it and
/// made of plain names (no `..`, no leading `/`).
#[derive(Debug)]
pub struct AgentWritable {
    path: PathBuf,
    fd: OwnedFd,
}

impl AgentWritable {
    /// Opens the directory at `path` (a path of the server's own: see the module's notes).
    pub fn open(path: &Path) -> std::io::Result<AgentWritable> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| error(path, e))?;
        Ok(AgentWritable { path: path.to_path_buf(), fd })
    }

    /// Makes the directory at `path` (mode `mode`, its parents as `create_dir_all` does) if it
    /// is not there, then opens it.
    pub fn create(path: &Path, mode: u32) -> std::io::Result<AgentWritable> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(mode).create(path)?;
        AgentWritable::open(path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory at `rel` beneath this one, made (mode `mode`) where it is missing, each
    /// component a real directory.
    pub fn create_dir(&self, rel: &str, mode: u32) -> std::io::Result<AgentWritable> {
        let mut dir = self.dir_fd()?;
        let mut path = self.path.clone();
        for name in components(rel)? {
            path.push(name);
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(error(&path, e)),
            }
            dir = open_dir_at(&dir, name, &path)?;
        }
        Ok(AgentWritable { path, fd: dir })
    }

    /// What is at `rel` (not following a link there), `None` when nothing is.
    pub fn kind(&self, rel: &str) -> std::io::Result<Option<FileType>> {
        match self.parent_of(rel) {
            Ok((parent, name, path)) => kind_at(&parent, name, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The regular file at `rel`, `None` when there is none; anything else there is an error.
    pub fn read(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some((file, path)) = self.open_file(rel)? else { return Ok(None) };
        let mut bytes = Vec::new();
        file.take(MAX_READ + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_READ {
            return Err(std::io::Error::other(format!("{} is larger than {MAX_READ} bytes", path.display())));
        }
        Ok(Some(bytes))
    }

    /// Up to `max` bytes of the regular file at `rel` from `offset` (a log read a little at a
    /// time), `None` when there is none; anything else there is an error.
    pub fn read_at(&self, rel: &str, offset: u64, max: u64) -> std::io::Result<Option<Vec<u8>>> {
        use std::io::{Seek, SeekFrom};
        let Some((mut file, _)) = self.open_file(rel)? else { return Ok(None) };
        file.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        file.take(max).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// The directory at `rel` beneath this one, `None` when there is none; each component must
    /// be a real directory (a link on the way is an error).
    pub fn dir(&self, rel: &str) -> std::io::Result<Option<AgentWritable>> {
        let mut dir = self.dir_fd()?;
        let mut path = self.path.clone();
        for name in components(rel)? {
            path.push(name);
            if kind_at(&dir, name, &path)?.is_none() {
                return Ok(None);
            }
            dir = open_dir_at(&dir, name, &path)?;
        }
        Ok(Some(AgentWritable { path, fd: dir }))
    }

    /// The regular file at `rel`, opened for reading without following a link, and its path.
    fn open_file(&self, rel: &str) -> std::io::Result<Option<(File, PathBuf)>> {
        let (parent, name, path) = match self.parent_of(rel) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match kind_at(&parent, name, &path)? {
            None => return Ok(None),
            Some(FileType::RegularFile) => {}
            Some(other) => return Err(not_a_file(&path, other)),
        }
        // O_NONBLOCK: a fifo swapped in after the check above does not hang the open.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&parent, name, flags, Mode::empty()).map_err(|e| error(&path, e))?;
        let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd).map_err(|e| error(&path, e))?.st_mode);
        if kind != FileType::RegularFile {
            return Err(not_a_file(&path, kind));
        }
        Ok(Some((File::from(fd), path)))
    }

    /// [`read`](Self::read) as UTF-8 text.
    pub fn read_string(&self, rel: &str) -> std::io::Result<Option<String>> {
        let path = self.path.join(rel);
        self.read(rel)?
            .map(|bytes| {
                String::from_utf8(bytes).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is not UTF-8", path.display()))
                })
            })
            .transpose()
    }

    /// Replaces whatever file (or link) is at `rel` with `bytes`, mode `mode`: written whole
    /// under a fresh name beside it, then renamed over it. Its directory must exist.
    pub fn replace(&self, rel: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let (parent, name, path) = self.parent_of(rel)?;
        if kind_at(&parent, name, &path)? == Some(FileType::Directory) {
            return Err(not_a_file(&path, FileType::Directory));
        }
        let tmp = format!(".{name}.switchyard-{}", uuid::Uuid::new_v4().simple());
        write_new(&parent, &tmp, bytes, mode).map_err(|e| error(&path, e))?;
        rustix::fs::renameat(&parent, tmp.as_str(), &parent, name).map_err(|e| {
            let _ = rustix::fs::unlinkat(&parent, tmp.as_str(), AtFlags::empty());
            error(&path, e)
        })
    }

    /// Writes `bytes` to a new file at `rel` (mode `mode`); `false`, writing nothing, when
    /// anything (a file, a link, a directory) is there already. Its directory must exist.
    pub fn create_new(&self, rel: &str, bytes: &[u8], mode: u32) -> std::io::Result<bool> {
        let (parent, name, path) = self.parent_of(rel)?;
        match write_new(&parent, name, bytes, mode) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(error(&path, e)),
        }
    }

    /// Removes the file (or link) at `rel`; nothing there is fine, a directory is an error.
    pub fn remove_file(&self, rel: &str) -> std::io::Result<()> {
        let (parent, name, path) = match self.parent_of(rel) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&parent, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(error(&path, e)),
        }
    }

    /// The names in this directory.
    pub fn names(&self) -> std::io::Result<Vec<OsString>> {
        let dir = rustix::fs::Dir::read_from(&self.fd).map_err(|e| error(&self.path, e))?;
        let mut names = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| error(&self.path, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(std::os::unix::ffi::OsStringExt::from_vec(name.to_vec()));
            }
        }
        Ok(names)
    }

    fn dir_fd(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// The directory holding `rel` (every component before the last opened without following
    /// links), the last component's name, and the full path for messages.
    fn parent_of<'r>(&self, rel: &'r str) -> std::io::Result<(OwnedFd, &'r str, PathBuf)> {
        let mut names = components(rel)?;
        let last = names.pop().expect("components are never empty");
        let mut dir = self.dir_fd()?;
        let mut path = self.path.clone();
        for name in names {
            path.push(name);
            dir = open_dir_at(&dir, name, &path)?;
        }
        path.push(last);
        Ok((dir, last, path))
    }
}

/// The plain names `rel` is made of.
fn components(rel: &str) -> std::io::Result<Vec<&str>> {
    let names: Vec<&str> = rel.split('/').filter(|n| !n.is_empty() && *n != ".").collect();
    if names.is_empty() || names.contains(&"..") || rel.starts_with('/') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("not a path beneath: {rel:?}")));
    }
    Ok(names)
}

/// The directory `name` in `dir`, which must be a real directory, not a link to one.
fn open_dir_at(dir: &OwnedFd, name: &str, path: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        // Say what is there instead.
        Err(Errno::LOOP | Errno::NOTDIR) => match kind_at(dir, name, path)? {
            Some(kind) if kind != FileType::Directory => Err(not_a_directory(path, kind)),
            _ => Err(error(path, Errno::NOTDIR)),
        },
        Err(e) => Err(error(path, e)),
    }
}

/// What `name` in `dir` is, not following a link; `None` when it is not there.
fn kind_at(dir: &OwnedFd, name: &str, path: &Path) -> std::io::Result<Option<FileType>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(error(path, e)),
    }
}

/// Creates `name` in `dir` (failing if anything is there) and writes `bytes` to it.
fn write_new(dir: &OwnedFd, name: &str, bytes: &[u8], mode: u32) -> Result<(), Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode))?;
    let mut file = File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
        return Err(e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error));
    }
    Ok(())
}

fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::Symlink => "a symbolic link (links an agent can write are never followed)",
        FileType::Directory => "a directory",
        FileType::Fifo => "a fifo",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "not a regular file",
    }
}

fn not_a_file(path: &Path, kind: FileType) -> std::io::Error {
    std::io::Error::other(format!("{} is {}, not a file; refusing to use it", path.display(), describe(kind)))
}

fn not_a_directory(path: &Path, kind: FileType) -> std::io::Error {
    std::io::Error::other(format!("{} is {}, not a directory; refusing to use it", path.display(), describe(kind)))
}

/// An error of the system naming the path it was about.
fn error(path: &Path, e: Errno) -> std::io::Error {
    let e = std::io::Error::from(e);
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;

    /// A directory an agent writes, and one outside it with a file the agent must not reach.
    fn dirs() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
        let (agent, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "root only\n").unwrap();
        (agent, outside, secret)
    }

    fn message(e: std::io::Error) -> String {
        e.to_string()
    }

    #[test]
    fn a_link_where_a_file_is_read_is_refused_not_followed() {
        let (agent, _outside, secret) = dirs();
        symlink(&secret, agent.path().join("settings.json")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        let refused = message(dir.read("settings.json").unwrap_err());
        assert!(refused.contains("settings.json is a symbolic link"), "{refused}");
        // Nor through a linked directory on the way.
        symlink(secret.parent().unwrap(), agent.path().join("conf")).unwrap();
        let refused = message(dir.read("conf/secret").unwrap_err());
        assert!(refused.contains("conf is a symbolic link") && refused.contains("not a directory"), "{refused}");
        assert_eq!(dir.read("missing").unwrap(), None);
        assert_eq!(dir.read("missing/too").unwrap(), None);
    }

    #[test]
    fn a_fifo_a_directory_or_a_device_where_a_file_is_read_is_refused_without_hanging() {
        let (agent, _outside, _secret) = dirs();
        nix::unistd::mkfifo(&agent.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir(agent.path().join("dir")).unwrap();
        symlink("/dev/zero", agent.path().join("zero")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        assert!(message(dir.read("fifo").unwrap_err()).contains("fifo is a fifo, not a file"));
        assert!(message(dir.read("dir").unwrap_err()).contains("dir is a directory, not a file"));
        assert!(message(dir.read("zero").unwrap_err()).contains("symbolic link"));
        assert!(message(dir.replace("dir", b"x", 0o600).unwrap_err()).contains("is a directory"));
        assert!(message(dir.create_dir("fifo", 0o700).unwrap_err()).contains("fifo is a fifo, not a directory"));
    }

    #[test]
    fn replacing_a_link_replaces_the_link_and_leaves_what_it_named() {
        let (agent, _outside, secret) = dirs();
        symlink(&secret, agent.path().join("token")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        dir.replace("token", b"sy_new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
        let written = agent.path().join("token");
        assert!(!written.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "sy_new");
        assert_eq!(written.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        // Only the file is left: the fresh name it was written under is gone.
        assert_eq!(dir.names().unwrap(), ["token"]);
    }

    #[test]
    fn a_new_file_is_not_written_through_a_link_even_one_to_nowhere_yet() {
        let (agent, outside, _secret) = dirs();
        let target = outside.path().join("planted");
        symlink(&target, agent.path().join("CLAUDE.md")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        assert!(!dir.create_new("CLAUDE.md", b"instructions", 0o644).unwrap(), "something is there");
        assert!(!target.exists(), "created outside through the link");
        assert!(dir.create_new("AGENTS.md", b"instructions", 0o644).unwrap());
        assert_eq!(std::fs::read_to_string(agent.path().join("AGENTS.md")).unwrap(), "instructions");
    }

    #[test]
    fn a_directory_is_made_beneath_never_through_a_link() {
        let (agent, outside, _secret) = dirs();
        symlink(outside.path(), agent.path().join(".claude")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        assert!(message(dir.create_dir(".claude/more", 0o700).unwrap_err()).contains(".claude is a symbolic link"));
        assert!(!outside.path().join("more").exists());
        let made = dir.create_dir("a/b", 0o700).unwrap();
        assert_eq!(made.path(), agent.path().join("a/b"));
        assert!(agent.path().join("a/b").is_dir());
        assert_eq!(dir.kind("a").unwrap(), Some(FileType::Directory));
        assert_eq!(dir.kind(".claude").unwrap(), Some(FileType::Symlink));
        assert_eq!(dir.kind("nowhere/else").unwrap(), None);
    }

    #[test]
    fn removing_a_link_removes_the_link_only() {
        let (agent, _outside, secret) = dirs();
        symlink(&secret, agent.path().join("token-old")).unwrap();
        let dir = AgentWritable::open(agent.path()).unwrap();
        dir.remove_file("token-old").unwrap();
        dir.remove_file("token-old").unwrap();
        assert!(secret.exists());
        assert!(agent.path().join("token-old").symlink_metadata().is_err());
    }

    #[test]
    fn a_path_that_leaves_the_directory_is_refused() {
        let (agent, _outside, _secret) = dirs();
        let dir = AgentWritable::open(agent.path()).unwrap();
        for rel in ["../secret", "/etc/passwd", "", "a/../../b"] {
            assert_eq!(dir.read(rel).unwrap_err().kind(), std::io::ErrorKind::InvalidInput, "{rel}");
        }
    }
}
