//! What a user may reach: mode bits, groups, ACLs, symlinks, and what is
//! no business of theirs.

use super::*;
use std::os::unix::fs::PermissionsExt as _;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stat(p: &Path) -> Stat {
    rustix::fs::stat(p).unwrap()
}

#[test]
fn mode_bits_by_owner_group_and_others() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, "x").unwrap();
    chmod(&f, 0o640);
    let st = stat(&f);
    let (uid, gid) = (st.st_uid, st.st_gid);
    let owner = Cred { uid: uid + 1000, gid: 4000, groups: vec![] };
    let owner = Cred { uid, ..owner };
    assert!(owner.may(&st, READ | WRITE, false));
    let member = Cred { uid: uid + 1000, gid: 4000, groups: vec![gid] };
    assert!(member.may(&st, READ, false) && !member.may(&st, WRITE, false));
    // An ACL: the group bits are its mask, not the group's rights.
    assert!(!member.may(&st, READ, true) && owner.may(&st, READ, true));
    let other = Cred { uid: uid + 1000, gid: gid + 1000, groups: vec![gid + 1001] };
    assert!(!other.may(&st, READ, false));
    // The owner class is the owner's, even when the group's is wider.
    chmod(&f, 0o060);
    let owner_in_group = Cred { uid, gid, groups: vec![] };
    if uid != 0 {
        assert!(!owner_in_group.may(&stat(&f), READ, false));
    }
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    assert!(root.may(&stat(&f), READ | WRITE, false) && !root.may(&stat(&f), SEARCH, false));
}

#[test]
fn every_directory_on_the_way_is_searched_as_the_user() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let private = dir.path().join("priv");
    std::fs::create_dir(&private).unwrap();
    chmod(&private, 0o700);
    let sock = private.join("e.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    chmod(&sock, 0o666);
    let me = stat(dir.path()).st_uid;
    let nobody = Cred { uid: me + 4242, gid: me + 4242, groups: vec![] };
    let e = check_socket(&sock, &nobody).err().unwrap().to_string();
    assert_eq!(e, format!("uid {} may not search {} (drwx------ {me}:{})", me + 4242, private.display(), me));
    // Through a symlink from a public place: the target is walked the same way.
    let link = dir.path().join("pub.sock");
    std::os::unix::fs::symlink(&sock, &link).unwrap();
    assert!(check_socket(&link, &nobody).err().unwrap().to_string().contains("may not search"));
    let relative = dir.path().join("rel.sock");
    std::os::unix::fs::symlink("priv/../priv/e.sock", &relative).unwrap();
    assert!(check_socket(&relative, &nobody).err().unwrap().to_string().contains("may not search"));
    chmod(&private, 0o711);
    assert!(check_socket(&link, &nobody).is_ok() && check_socket(&relative, &nobody).is_ok());
    chmod(&sock, 0o600);
    let e = check_socket(&sock, &nobody).err().unwrap().to_string();
    assert!(e.starts_with(&format!("uid {} may not connect to {}", me + 4242, sock.display())), "{e}");
    // The owner connects, through the checked directory.
    let owner = Cred { uid: me, gid: 0, groups: vec![] };
    assert!(connect(&link, &owner).is_ok());
    // Not a socket, not there, a loop.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    assert!(check_socket(&dir.path().join("file"), &owner).err().unwrap().to_string().ends_with("is no socket"));
    assert!(matches!(check_socket(&dir.path().join("none"), &owner), Err(Denied::Missing(_))));
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    assert_eq!(check_socket(&dir.path().join("loop"), &owner).err(), Some(Denied::Refused("a symlink loop".into())));
}

#[test]
fn an_acl_grants_nothing_beyond_its_owner_class() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let sock = dir.path().join("e.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // user::rw- user:4243:rw- group::--- mask::rw- other::---, as the
    // kernel stores it (linux/posix_acl_xattr.h): the mode's group bits
    // show the mask (rw), the owning group has nothing.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in
        [(0x01u16, 6u16, u32::MAX), (0x02, 6, 4243), (0x04, 0, u32::MAX), (0x10, 6, u32::MAX), (0x20, 0, u32::MAX)]
    {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    if rustix::fs::setxattr(&sock, "system.posix_acl_access", &acl, rustix::fs::XattrFlags::empty()).is_err() {
        return; // no ACLs on this filesystem
    }
    let st = stat(&sock);
    assert_eq!(st.st_mode & 0o070, 0o060, "the mask shows as the group bits");
    let member = Cred { uid: st.st_uid + 4242, gid: 4000, groups: vec![st.st_gid] };
    let e = check_socket(&sock, &member).err().unwrap().to_string();
    assert!(e.contains("may not connect"), "{e}");
    let owner = Cred { uid: st.st_uid, gid: 4000, groups: vec![] };
    assert!(check_socket(&sock, &owner).is_ok());
}

#[test]
fn set_id_processes_are_nobodys_word() {
    let dir = tempfile::tempdir().unwrap();
    let status = |uid: &str, gid: &str| {
        std::fs::write(dir.path().join("status"), format!("Name:\tx\nUid:\t{uid}\nGid:\t{gid}\nGroups:\t27 100 \n"))
            .unwrap();
        Cred::of_process(dir.path())
    };
    assert_eq!(
        status("1000\t1000\t1000\t1000", "1000\t1000\t1000\t1000"),
        Ok(Cred { uid: 1000, gid: 1000, groups: vec![27, 100] })
    );
    assert!(status("1000\t0\t0\t0", "1000\t1000\t1000\t1000").unwrap_err().contains("set-id"));
    assert!(status("1000\t1000\t1000\t1000", "1000\t0\t1000\t1000").unwrap_err().contains("set-id"));
}

#[test]
fn below_a_directory_the_user_may_not_search_nothing_is_there_for_them() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let private = dir.path().join("priv");
    std::fs::create_dir(&private).unwrap();
    chmod(&private, 0o700);
    let there = private.join("there.json");
    std::fs::write(&there, "{}").unwrap();
    let absent = private.join("absent.json");
    let me = stat(dir.path()).st_uid;
    let other = Cred { uid: me + 4242, gid: me + 4242, groups: vec![] };
    // Alike for them, whatever is there: nothing, and the same words.
    assert!(matches!(lookup(&there, &other), Ok(None)) && matches!(lookup(&absent, &other), Ok(None)));
    let why = |p: &Path| resolve(p, &other).err().unwrap().to_string();
    assert_eq!(why(&there), why(&absent));
    assert!(why(&there).contains("may not search"), "{}", why(&there));
    let owner = Cred { uid: me, gid: 0, groups: vec![] };
    assert!(lookup(&there, &owner).unwrap().is_some() && lookup(&absent, &owner).unwrap().is_none());
    // A loop where they may look is theirs to see: refused, not hidden.
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    assert!(lookup(&dir.path().join("loop"), &other).is_err());
}
