//! The in-memory driver: the simulator's frame exchange. It shows the whole
//! driver contract: deliver frames, fire timers, drain transmissions.

use crate::Device;
use std::collections::VecDeque;

/// A device plus an inbox of frames not yet handed to it.
#[derive(Debug)]
pub struct MemoryDriver {
    device: Device,
    inbox: VecDeque<Vec<u8>>,
}

impl MemoryDriver {
    /// Wraps a device.
    pub fn new(device: Device) -> Self {
        MemoryDriver {
            device,
            inbox: VecDeque::new(),
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device, for verbs calls.
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.device
    }

    /// Queues a received frame.
    pub fn deliver(&mut self, frame: Vec<u8>) {
        self.inbox.push_back(frame);
    }

    /// One turn of the driver loop at `now`: hand over received frames, fire
    /// due timers, and return every frame the device wants to send.
    pub fn poll(&mut self, now: u64) -> Vec<Vec<u8>> {
        while let Some(frame) = self.inbox.pop_front() {
            self.device.handle_frame(now, &frame);
        }
        if self.device.poll_timeout().is_some_and(|t| t <= now) {
            self.device.handle_timeout(now);
        }
        let mut out = Vec::new();
        while let Some(frame) = self.device.poll_transmit() {
            out.push(frame);
        }
        out
    }

    /// When the device next needs `poll` without any frame arriving.
    pub fn next_timeout(&self) -> Option<u64> {
        self.device.poll_timeout()
    }
}
