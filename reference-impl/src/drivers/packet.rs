//! The AF_PACKET socket under [`super::raw`]: one socket bound to one
//! interface for every EtherType, non-blocking, and the three system calls
//! the driver's loop makes on it:
//!
//! - [`PacketSocket::try_recv`]: one `recv(MSG_DONTWAIT | MSG_TRUNC)` into
//!   the caller's buffer; nothing queued is `Ok(None)`, not a wait; on a
//!   socket opened with receive timestamps, `recvmsg(2)` instead, which
//!   also returns the time the kernel took the frame in (`SO_TIMESTAMPNS`,
//!   through nix: rustix has no safe call for that control message);
//! - [`PacketSocket::wait`]: `ppoll(2)` for readable (or writable), only
//!   when the socket has nothing queued; a wait for frames also ends when
//!   the socket's wake-up `eventfd(2)` ([`PacketSocket::waker`]) is
//!   signalled;
//! - [`PacketSocket::send_batch`]: up to [`SEND_BATCH`] frames in one
//!   `sendmmsg(2)`.
//!
//! pnet's datalink channel, used before, polls before every receive and
//! every send (two system calls a frame) and cannot batch. pnet still opens
//! the channel here (it binds the socket to the interface with `ETH_P_ALL`
//! and joins promiscuous mode, which rustix has no safe call for): the
//! socket is created here with its receive buffer, a duplicate of the
//! descriptor is handed to pnet, and pnet's channel is dropped as soon as
//! it has bound it; binding and membership belong to the socket, which
//! this descriptor keeps open. No unsafe code: rustix and pnet hold it.

use pnet_datalink::NetworkInterface;
use std::io;
use std::time::{Duration, SystemTime};

/// Frames one `sendmmsg(2)` carries at most.
pub const SEND_BATCH: usize = 64;

/// What the socket is: see the module documentation.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    rx_buffer: Option<usize>,
    /// `SO_TIMESTAMPNS` is on: receives go through `recvmsg(2)`.
    stamps: bool,
    /// The wake-up eventfd, once [`PacketSocket::waker`] made it.
    #[cfg(target_os = "linux")]
    wake: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// A wait for frames ended on the wake-up (taken by
    /// [`PacketSocket::take_woken`]).
    woken: std::cell::Cell<bool>,
}

/// A frame [`PacketSocket::try_recv`] took: its length on the wire (more
/// than the buffer when it was truncated) and, on a socket with receive
/// timestamps, when the kernel received it (its `CLOCK_REALTIME`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) at: Option<SystemTime>,
}

#[cfg(target_os = "linux")]
impl PacketSocket {
    /// A socket on `iface` with a receive buffer of `rx_buffer` bytes (0:
    /// the system default), in promiscuous mode if asked, for every
    /// EtherType, or only IPv4 when `ipv4_only`; with the kernel's receive
    /// time of every frame when `stamps`.
    pub(crate) fn open(
        iface: &NetworkInterface,
        rx_buffer: usize,
        promiscuous: bool,
        ipv4_only: bool,
        stamps: bool,
    ) -> io::Result<Self> {
        use pnet_datalink::{Channel, ChannelType, Config};
        use rustix::net::{AddressFamily, SocketType, socket, sockopt};
        use std::os::fd::IntoRawFd;
        // Protocol 0: nothing is received until the bind (ETH_P_ALL on this
        // interface), so no frame of another interface gets in first.
        let fd = socket(AddressFamily::PACKET, SocketType::RAW, None)?;
        if rx_buffer > 0 && sockopt::set_socket_recv_buffer_size_force(&fd, rx_buffer).is_err() {
            // Without CAP_NET_ADMIN: as much as net.core.rmem_max allows.
            let _ = sockopt::set_socket_recv_buffer_size(&fd, rx_buffer);
        }
        let rx_buffer = sockopt::socket_recv_buffer_size(&fd).ok();
        let for_pnet = rustix::io::dup(&fd)?;
        let config = Config {
            socket_fd: Some(for_pnet.into_raw_fd()),
            read_buffer_size: 64,
            write_buffer_size: 64,
            promiscuous,
            // pnet binds with this protocol; the socket stays SOCK_RAW
            // (whole frames). IPv4 only (ETH_P_IP) puts the socket on the
            // interface's protocol list instead of the every-protocol tap:
            // the frames this socket sends are not copied back to it.
            channel_type: if ipv4_only {
                ChannelType::Layer3(0x0800)
            } else {
                ChannelType::Layer2
            },
            ..Config::default()
        };
        // pnet binds, joins promiscuous mode and sets O_NONBLOCK (on the
        // open file, so on `fd` too), then closes its descriptor here.
        match pnet_datalink::channel(iface, config)? {
            Channel::Ethernet(_tx, _rx) => {}
            _ => return Err(io::Error::other("not an Ethernet channel")),
        }
        rustix::io::ioctl_fionbio(&fd, true)?;
        if stamps {
            use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
            setsockopt(&fd, ReceiveTimestampns, &true).map_err(io::Error::from)?;
        }
        Ok(PacketSocket {
            fd,
            rx_buffer,
            stamps,
            wake: None,
            woken: std::cell::Cell::new(false),
        })
    }

    /// A function that, from any thread, ends the current or next wait
    /// for frames ([`Self::wait`], not `writable`): it signals an
    /// `eventfd(2)` that wait polls with the socket. Made once; `None`
    /// when the eventfd cannot be made.
    pub(crate) fn waker(&mut self) -> Option<std::sync::Arc<dyn Fn() + Send + Sync>> {
        use rustix::event::{EventfdFlags, eventfd};
        let fd = match &self.wake {
            Some(fd) => std::sync::Arc::clone(fd),
            None => {
                let fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).ok()?;
                let fd = std::sync::Arc::new(fd);
                self.wake = Some(std::sync::Arc::clone(&fd));
                fd
            }
        };
        Some(std::sync::Arc::new(move || {
            // A full counter (EAGAIN) is already signalled.
            let _ = rustix::io::write(&*fd, &1u64.to_ne_bytes());
        }))
    }

    /// Whether a wait ended on the wake-up since the last call.
    pub(crate) fn take_woken(&self) -> bool {
        self.woken.replace(false)
    }

    /// The receive buffer in bytes as the kernel reports it (it doubles
    /// the value asked for), if known.
    pub(crate) fn rx_buffer(&self) -> Option<usize> {
        self.rx_buffer
    }

    /// Receives the next queued frame into `buf`, or `None` when no frame
    /// is queued. Never waits.
    pub(crate) fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        use rustix::net::{RecvFlags, recv};
        if self.stamps {
            return self.try_recv_stamped(buf);
        }
        loop {
            match recv(&self.fd, &mut *buf, RecvFlags::DONTWAIT | RecvFlags::TRUNC) {
                Ok((_, len)) => return Ok(Some(Received { len, at: None })),
                Err(rustix::io::Errno::AGAIN) => return Ok(None),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// [`Self::try_recv`] through `recvmsg(2)`, with the `SCM_TIMESTAMPNS`
    /// control message the socket asked for (absent if the kernel gave
    /// none: then `at` is `None`).
    fn try_recv_stamped(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        use nix::errno::Errno;
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        use std::os::fd::AsRawFd;
        let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
        loop {
            let mut iov = [io::IoSliceMut::new(&mut *buf)];
            match recvmsg::<()>(
                self.fd.as_raw_fd(),
                &mut iov,
                Some(&mut control),
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
            ) {
                Ok(msg) => {
                    let at = msg.cmsgs().ok().and_then(|mut cmsgs| {
                        cmsgs.find_map(|c| match c {
                            ControlMessageOwned::ScmTimestampns(ts) => {
                                let secs = u64::try_from(ts.tv_sec()).ok()?;
                                let nanos = u32::try_from(ts.tv_nsec()).ok()?;
                                SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
                            }
                            _ => None,
                        })
                    });
                    return Ok(Some(Received { len: msg.bytes, at }));
                }
                Err(Errno::EAGAIN) => return Ok(None),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Waits at most `timeout` until a frame is queued (`writable`: until
    /// the send buffer has room). Returns whether it is so; a signal ends
    /// the wait early (`false`), and so does the wake-up when waiting for
    /// frames (`false`, and [`Self::take_woken`] then says so).
    pub(crate) fn wait(&self, timeout: Duration, writable: bool) -> io::Result<bool> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let flags = if writable {
            PollFlags::OUT
        } else {
            PollFlags::IN
        };
        let wake = self.wake.as_deref().filter(|_| !writable);
        let mut fds = [PollFd::new(&self.fd, flags)];
        let mut both = wake.map(|w| [PollFd::new(&self.fd, flags), PollFd::new(w, PollFlags::IN)]);
        let ts = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let polled = match both.as_mut() {
            Some(both) => poll(both, Some(&ts)),
            None => poll(&mut fds, Some(&ts)),
        };
        match polled {
            Ok(0) => Ok(false),
            Ok(_) => {
                let Some((both, wake)) = both.as_ref().zip(wake) else {
                    return Ok(true);
                };
                if !both[1].revents().is_empty() {
                    // Reset the counter; a concurrent signal is kept.
                    let mut buf = [0u8; 8];
                    let _ = rustix::io::read(wake, &mut buf);
                    self.woken.set(true);
                }
                Ok(!both[0].revents().is_empty())
            }
            Err(rustix::io::Errno::INTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends the first frames of `frames` (at most [`SEND_BATCH`]) in one
    /// `sendmmsg(2)` and returns how many left. An error only when the
    /// first could not: `WouldBlock` when the send buffer is full.
    pub(crate) fn send_batch<F: AsRef<[u8]>>(&self, frames: &[F]) -> io::Result<usize> {
        use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, sendmmsg};
        use std::io::IoSlice;
        let frames = &frames[..frames.len().min(SEND_BATCH)];
        if frames.is_empty() {
            return Ok(0);
        }
        let iovs: Vec<[IoSlice<'_>; 1]> =
            frames.iter().map(|f| [IoSlice::new(f.as_ref())]).collect();
        let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> = frames
            .iter()
            .map(|_| SendAncillaryBuffer::default())
            .collect();
        let mut msgs: Vec<MMsgHdr<'_>> = iovs
            .iter()
            .zip(controls.iter_mut())
            .map(|(iov, control)| MMsgHdr::new(iov, control))
            .collect();
        loop {
            match sendmmsg(&self.fd, &mut msgs, SendFlags::DONTWAIT) {
                Ok(n) => return Ok(n),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// AF_PACKET is Linux's: elsewhere opening fails.
#[cfg(not(target_os = "linux"))]
impl PacketSocket {
    pub(crate) fn open(
        _: &NetworkInterface,
        _: usize,
        _: bool,
        _: bool,
        _: bool,
    ) -> io::Result<Self> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the raw driver needs Linux (AF_PACKET)",
        ))
    }
    pub(crate) fn rx_buffer(&self) -> Option<usize> {
        self.rx_buffer
    }
    pub(crate) fn try_recv(&self, _: &mut [u8]) -> io::Result<Option<Received>> {
        Ok(None)
    }
    pub(crate) fn wait(&self, _: Duration, _: bool) -> io::Result<bool> {
        Ok(false)
    }
    pub(crate) fn waker(&mut self) -> Option<std::sync::Arc<dyn Fn() + Send + Sync>> {
        None
    }
    pub(crate) fn take_woken(&self) -> bool {
        false
    }
    pub(crate) fn send_batch<F: AsRef<[u8]>>(&self, _: &[F]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}
