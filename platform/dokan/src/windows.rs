//! The Dokan binding: the `dokan` crate's [`FileSystemHandler`] over the [`Adapter`]
//! (types converted, nothing decided here), the current user's SID, and the mount.

use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use dokan::{
    CreateFileInfo, DiskSpaceInfo, FileInfo, FileSystemHandler, FileSystemMounter,
    FileTimeOperation, FillDataError, FillDataResult, FindData, MountFlags, MountOptions,
    OperationInfo, OperationResult, VolumeInfo, IO_SECURITY_CONTEXT,
};
use gjcfs_vfs::Vfs;
use widestring::{U16CStr, U16CString};
use winapi::shared::minwindef::DWORD;
use winapi::um::winnt::{ACCESS_MASK, PSECURITY_DESCRIPTOR};

use crate::adapter::{Adapter, CreateRequest, Handle};
use crate::security::Sid;
use crate::status::*;

/// The handler Dokan calls: the adapter, and what the volume reports.
pub struct Handler {
    adapter: Adapter,
    /// Where free space is measured (the store's directory).
    store: PathBuf,
    read_only: bool,
    /// Set when Dokan unmounts the volume.
    unmounted: AtomicBool,
}

fn path_of(name: &U16CStr) -> String {
    name.to_string_lossy()
}

impl<'c, 'h: 'c> FileSystemHandler<'c, 'h> for Handler {
    type Context = Handle;

    fn create_file(
        &'h self,
        file_name: &U16CStr,
        _security_context: &IO_SECURITY_CONTEXT,
        desired_access: ACCESS_MASK,
        _file_attributes: u32,
        _share_access: u32,
        create_disposition: u32,
        create_options: u32,
        info: &mut OperationInfo<'c, 'h, Self>,
    ) -> OperationResult<CreateFileInfo<Self::Context>> {
        let requester = info
            .requester_token()
            .and_then(|t| token_user(t.as_raw_handle()));
        let request = CreateRequest {
            desired_access,
            disposition: create_disposition,
            options: create_options,
        };
        let handle = self
            .adapter
            .create(&path_of(file_name), request, requester.as_ref())?;
        Ok(CreateFileInfo {
            is_dir: handle.is_dir,
            context: handle,
            new_file_created: false,
        })
    }

    fn close_file(
        &'h self,
        file_name: &U16CStr,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) {
        if let Err(status) = self.adapter.close(context) {
            tracing::warn!(
                "{}: a write failed at close (NTSTATUS {status:#010x})",
                path_of(file_name)
            );
        }
    }

    fn read_file(
        &'h self,
        _file_name: &U16CStr,
        offset: i64,
        buffer: &mut [u8],
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<u32> {
        let offset = u64::try_from(offset).map_err(|_| STATUS_INVALID_PARAMETER)?;
        let len = u32::try_from(buffer.len()).unwrap_or(u32::MAX);
        let bytes = self.adapter.read(context, offset, len)?;
        buffer[..bytes.len()].copy_from_slice(&bytes);
        Ok(bytes.len() as u32)
    }

    fn write_file(
        &'h self,
        _file_name: &U16CStr,
        offset: i64,
        buffer: &[u8],
        info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<u32> {
        let to_end = info.write_to_eof();
        let offset = if to_end {
            0
        } else {
            u64::try_from(offset).map_err(|_| STATUS_INVALID_PARAMETER)?
        };
        self.adapter.write(context, offset, buffer, to_end)
    }

    fn flush_file_buffers(
        &'h self,
        _file_name: &U16CStr,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        self.adapter.flush(context)
    }

    fn get_file_information(
        &'h self,
        _file_name: &U16CStr,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<FileInfo> {
        let i = self.adapter.info(context)?;
        Ok(FileInfo {
            attributes: i.attributes,
            creation_time: i.mtime,
            last_access_time: i.mtime,
            last_write_time: i.mtime,
            file_size: i.size,
            number_of_links: i.links,
            file_index: i.index,
        })
    }

    fn find_files(
        &'h self,
        file_name: &U16CStr,
        mut fill_find_data: impl FnMut(&FindData) -> FillDataResult,
        _info: &OperationInfo<'c, 'h, Self>,
        _context: &'c Self::Context,
    ) -> OperationResult<()> {
        for found in self.adapter.find(&path_of(file_name))? {
            let Ok(name) = U16CString::from_str(&found.name) else {
                continue;
            };
            let data = FindData {
                attributes: found.info.attributes,
                creation_time: found.info.mtime,
                last_access_time: found.info.mtime,
                last_write_time: found.info.mtime,
                file_size: found.info.size,
                file_name: name,
            };
            match fill_find_data(&data) {
                Ok(()) => {}
                // Longer than a listing entry holds: left out of the listing (it still opens
                // by its name).
                Err(FillDataError::NameTooLong) => {}
                Err(FillDataError::BufferFull) => return Err(STATUS_BUFFER_OVERFLOW),
            }
        }
        Ok(())
    }

    fn set_file_attributes(
        &'h self,
        _file_name: &U16CStr,
        file_attributes: u32,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        let now = self.adapter.info(context)?.attributes;
        let changes = file_attributes != 0 && file_attributes != now;
        self.adapter.set_other(context, changes)
    }

    fn set_file_time(
        &'h self,
        _file_name: &U16CStr,
        creation_time: FileTimeOperation,
        last_access_time: FileTimeOperation,
        last_write_time: FileTimeOperation,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        let changes = [creation_time, last_access_time, last_write_time]
            .iter()
            .any(|t| matches!(t, FileTimeOperation::SetTime(_)));
        self.adapter.set_other(context, changes)
    }

    fn delete_file(
        &'h self,
        file_name: &U16CStr,
        info: &OperationInfo<'c, 'h, Self>,
        _context: &'c Self::Context,
    ) -> OperationResult<()> {
        if info.delete_on_close() {
            Err(self.adapter.removal(&path_of(file_name)))
        } else {
            Ok(())
        }
    }

    fn delete_directory(
        &'h self,
        file_name: &U16CStr,
        info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        self.delete_file(file_name, info, context)
    }

    fn move_file(
        &'h self,
        file_name: &U16CStr,
        _new_file_name: &U16CStr,
        _replace_if_existing: bool,
        _info: &OperationInfo<'c, 'h, Self>,
        _context: &'c Self::Context,
    ) -> OperationResult<()> {
        Err(self.adapter.rename(&path_of(file_name)))
    }

    fn set_end_of_file(
        &'h self,
        _file_name: &U16CStr,
        offset: i64,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        let size = u64::try_from(offset).map_err(|_| STATUS_INVALID_PARAMETER)?;
        self.adapter.set_size(context, size)
    }

    fn set_allocation_size(
        &'h self,
        _file_name: &U16CStr,
        _alloc_size: i64,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        self.adapter.set_allocation(context)
    }

    fn get_disk_free_space(
        &'h self,
        _info: &OperationInfo<'c, 'h, Self>,
    ) -> OperationResult<DiskSpaceInfo> {
        free_space(&self.store)
    }

    fn get_volume_information(
        &'h self,
        _info: &OperationInfo<'c, 'h, Self>,
    ) -> OperationResult<VolumeInfo> {
        use winapi::um::winnt::{
            FILE_CASE_PRESERVED_NAMES, FILE_PERSISTENT_ACLS, FILE_READ_ONLY_VOLUME,
            FILE_UNICODE_ON_DISK,
        };
        let mut fs_flags = FILE_CASE_PRESERVED_NAMES | FILE_UNICODE_ON_DISK | FILE_PERSISTENT_ACLS;
        if self.read_only {
            fs_flags |= FILE_READ_ONLY_VOLUME;
        }
        let name = |s: &str| U16CString::from_str(s).map_err(|_| STATUS_INVALID_PARAMETER);
        Ok(VolumeInfo {
            name: name("gjcfs")?,
            serial_number: 0x676a_6366,
            max_component_length: 255,
            fs_flags,
            fs_name: name("gjcfs")?,
        })
    }

    fn mounted(
        &'h self,
        _mount_point: &U16CStr,
        _info: &OperationInfo<'c, 'h, Self>,
    ) -> OperationResult<()> {
        Ok(())
    }

    fn unmounted(&'h self, _info: &OperationInfo<'c, 'h, Self>) -> OperationResult<()> {
        self.unmounted.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn get_file_security(
        &'h self,
        _file_name: &U16CStr,
        security_information: u32,
        security_descriptor: PSECURITY_DESCRIPTOR,
        buffer_length: u32,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<u32> {
        let bytes = self.adapter.security(context, security_information)?;
        if bytes.len() <= buffer_length as usize {
            // SAFETY: Dokan gives a buffer of `buffer_length` bytes; as many are written.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    security_descriptor.cast::<u8>(),
                    bytes.len(),
                );
            }
        }
        Ok(bytes.len() as u32)
    }

    fn set_file_security(
        &'h self,
        _file_name: &U16CStr,
        _security_information: u32,
        _security_descriptor: PSECURITY_DESCRIPTOR,
        _buffer_length: u32,
        _info: &OperationInfo<'c, 'h, Self>,
        context: &'c Self::Context,
    ) -> OperationResult<()> {
        self.adapter.set_other(context, true)
    }
}

/// The free space of the disk holding `dir`.
fn free_space(dir: &Path) -> OperationResult<DiskSpaceInfo> {
    use std::os::windows::ffi::OsStrExt;
    use winapi::um::fileapi::GetDiskFreeSpaceExW;
    let wide: Vec<u16> = dir.as_os_str().encode_wide().chain([0]).collect();
    let (mut available, mut total, mut free) = (0u64, 0u64, 0u64);
    // SAFETY: a NUL-terminated path and three u64s the call fills (ULARGE_INTEGER is a u64).
    let ok = unsafe {
        GetDiskFreeSpaceExW(
            wide.as_ptr(),
            (&mut available as *mut u64).cast(),
            (&mut total as *mut u64).cast(),
            (&mut free as *mut u64).cast(),
        )
    };
    if ok == 0 {
        return Err(STATUS_IO_DEVICE_ERROR);
    }
    Ok(DiskSpaceInfo {
        byte_count: total,
        free_byte_count: free,
        available_byte_count: available,
    })
}

/// The user a token belongs to.
fn token_user(token: std::os::windows::io::RawHandle) -> Option<Sid> {
    use winapi::um::securitybaseapi::{GetLengthSid, GetTokenInformation};
    use winapi::um::winnt::{TokenUser, TOKEN_USER};
    let mut needed: DWORD = 0;
    // SAFETY: a size query (no buffer); `needed` receives the size.
    unsafe {
        GetTokenInformation(
            token.cast(),
            TokenUser,
            std::ptr::null_mut(),
            0,
            &mut needed,
        )
    };
    if needed == 0 {
        return None;
    }
    // u64s, so that the TOKEN_USER at its start is aligned.
    let mut buffer = vec![0u64; (needed as usize).div_ceil(8)];
    // SAFETY: a buffer of at least `needed` bytes.
    let ok = unsafe {
        GetTokenInformation(
            token.cast(),
            TokenUser,
            buffer.as_mut_ptr().cast(),
            needed,
            &mut needed,
        )
    };
    if ok == 0 {
        return None;
    }
    // SAFETY: the call filled a TOKEN_USER; its SID points into the same buffer.
    unsafe {
        let user = &*(buffer.as_ptr().cast::<TOKEN_USER>());
        let sid = user.User.Sid;
        let len = GetLengthSid(sid) as usize;
        Sid::from_bytes(std::slice::from_raw_parts(sid.cast::<u8>(), len))
    }
}

/// The user this process runs as.
pub fn current_user() -> Option<Sid> {
    use winapi::um::handleapi::CloseHandle;
    use winapi::um::processthreadsapi::{GetCurrentProcess, OpenProcessToken};
    use winapi::um::winnt::TOKEN_QUERY;
    let mut token = std::ptr::null_mut();
    // SAFETY: the process's own token, closed below.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return None;
    }
    let sid = token_user(token.cast());
    // SAFETY: the handle opened above.
    unsafe { CloseHandle(token) };
    sid
}

/// Why a mount failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("cannot tell which user this process runs as")]
    NoUser,
    #[error("{0}: not a mount point Dokan takes")]
    BadMountPoint(String),
    #[error("Dokan could not mount at {mount_point}: {reason}")]
    Mount { mount_point: String, reason: String },
}

/// Set by Ctrl-C (or the console closing): the mount is removed.
static STOP: AtomicBool = AtomicBool::new(false);

unsafe extern "system" fn on_console_event(_event: DWORD) -> i32 {
    STOP.store(true, Ordering::SeqCst);
    1
}

/// How often loaded sessions are checked for changes made outside the mount.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Mounts `vfs` at `mount_point` (a drive letter `M:` or an empty NTFS directory) for the
/// current user and logon session, and serves it until it is unmounted (`gjcfs umount`,
/// Ctrl-C). Every change the model announces is notified to Windows by path. `store` is
/// where free space is measured.
pub fn serve(
    vfs: Arc<Vfs>,
    mount_point: &str,
    store: &Path,
    read_only: bool,
    mut say: impl FnMut(String),
) -> Result<(), MountError> {
    let owner = current_user().ok_or(MountError::NoUser)?;
    let wide_point = U16CString::from_str(mount_point)
        .map_err(|_| MountError::BadMountPoint(mount_point.to_owned()))?;
    let handler = Handler {
        adapter: Adapter::new(vfs.clone(), owner.clone()),
        store: store.to_owned(),
        read_only,
        unmounted: AtomicBool::new(false),
    };
    let mut flags = MountFlags::CURRENT_SESSION;
    if read_only {
        flags |= MountFlags::WRITE_PROTECT;
    }
    let options = MountOptions {
        flags,
        timeout: Duration::from_secs(30),
        ..MountOptions::default()
    };
    dokan::init();
    let served = {
        let mut mounter = FileSystemMounter::new(&handler, &wide_point, &options);
        match mounter.mount() {
            Err(e) => Err(MountError::Mount {
                mount_point: mount_point.to_owned(),
                reason: match e {
                    dokan::FileSystemMountError::DriverInstall => format!(
                        "{e}: the Dokan driver is not installed or not running (install \
                         Dokan 2 from https://github.com/dokan-dev/dokan/releases)"
                    ),
                    other => other.to_string(),
                },
            }),
            Ok(file_system) => {
                let instance = file_system.instance();
                let notifier = Adapter::new(vfs.clone(), owner);
                let (tx, rx) = mpsc::channel::<Vec<u64>>();
                let prefix = mount_point.trim_end_matches('\\').to_owned();
                std::thread::spawn(move || {
                    while let Ok(first) = rx.recv() {
                        let inos: Vec<u64> = std::iter::once(first)
                            .chain(rx.try_iter())
                            .flatten()
                            .collect();
                        for path in notifier.changed_paths(&inos) {
                            if let Ok(full) = U16CString::from_str(format!("{prefix}{path}")) {
                                // False: nothing watches that path, or the mount is going.
                                let _ = dokan::notify_update(instance, full);
                            }
                        }
                    }
                });
                let tx = parking_lot::Mutex::new(tx);
                vfs.set_invalidator(Box::new(move |inos: &[u64]| {
                    let _ = tx.lock().send(inos.to_vec());
                }));
                // SAFETY: installs a handler that only sets an atomic flag.
                unsafe { winapi::um::consoleapi::SetConsoleCtrlHandler(Some(on_console_event), 1) };
                say(format!("mounted at {mount_point}"));
                let mut asked = false;
                while !handler.unmounted.load(Ordering::SeqCst) {
                    std::thread::sleep(POLL_EVERY);
                    vfs.poll_outside_changes();
                    for notice in vfs.take_notices() {
                        say(notice);
                    }
                    if STOP.load(Ordering::SeqCst) && !asked {
                        asked = true;
                        vfs.stop_writes();
                        say("writes refused from now on; unmounting".to_owned());
                        if !dokan::unmount(&wide_point) {
                            say(format!("Dokan did not remove the mount at {mount_point}"));
                        }
                    }
                }
                // Waits for Dokan to finish with the volume.
                drop(file_system);
                Ok(())
            }
        }
    };
    dokan::shutdown();
    served
}

/// Removes the Dokan mount at `mount_point` (its server then closes every session).
pub fn unmount(mount_point: &str) -> Result<(), MountError> {
    let wide = U16CString::from_str(mount_point)
        .map_err(|_| MountError::BadMountPoint(mount_point.to_owned()))?;
    if dokan::unmount(wide) {
        Ok(())
    } else {
        Err(MountError::Mount {
            mount_point: mount_point.to_owned(),
            reason: "no Dokan mount is there".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_user_has_a_sid() {
        let sid = current_user().expect("the process's user");
        assert!(sid.to_string().starts_with("S-1-"), "{sid}");
    }

    /// Windows reads the descriptor as the one it describes: owner, group and a protected
    /// DACL allowing the owner alone.
    #[test]
    fn windows_reads_the_descriptor_as_owner_only() {
        use winapi::shared::sddl::ConvertSecurityDescriptorToStringSecurityDescriptorW;
        use winapi::um::securitybaseapi::IsValidSecurityDescriptor;
        use winapi::um::winbase::LocalFree;
        let owner = Sid::parse("S-1-5-21-1-2-3-1001").expect("sid");
        let all = crate::security::OWNER_SECURITY_INFORMATION
            | crate::security::GROUP_SECURITY_INFORMATION
            | crate::security::DACL_SECURITY_INFORMATION;
        let mut sd = crate::security::descriptor(&owner, gjcfs_vfs::NodeKind::File, 0o400, all);
        // SAFETY: a self-relative descriptor in a live buffer; the string is freed below.
        let text = unsafe {
            assert_ne!(IsValidSecurityDescriptor(sd.as_mut_ptr().cast()), 0);
            let mut out = std::ptr::null_mut();
            let ok = ConvertSecurityDescriptorToStringSecurityDescriptorW(
                sd.as_mut_ptr().cast(),
                1,
                all,
                &mut out,
                std::ptr::null_mut(),
            );
            assert_ne!(ok, 0);
            let text = U16CStr::from_ptr_str(out).to_string_lossy();
            LocalFree(out.cast());
            text
        };
        assert_eq!(
            text,
            "O:S-1-5-21-1-2-3-1001G:S-1-5-21-1-2-3-1001D:P(A;;FR;;;S-1-5-21-1-2-3-1001)"
        );
    }
}
