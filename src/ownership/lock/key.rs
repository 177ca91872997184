//! What names a GPU for every process of a host alike: its PCI bus id, else its UUID (never
//! the ordinal, which `CUDA_VISIBLE_DEVICES` renumbers), and the lock file stem made of it.

/// What identifies a GPU across processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceKey {
    /// This process's ordinal for it, for messages.
    pub ordinal: usize,
    /// `0000:19:00.0`, normalised by [`normalize_bus_id`].
    pub pci_bus_id: Option<String>,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML writes it.
    pub uuid: Option<String>,
}

impl DeviceKey {
    /// The file name stem of the device's lock: `pci-0000-19-00.0` or `uuid-GPU-...`;
    /// `None` when nothing stable names the device.
    pub fn stem(&self) -> Option<String> {
        let clean = |s: &str| crate::output::file_safe(s, '-');
        match (&self.pci_bus_id, &self.uuid) {
            (Some(b), _) => Some(format!("pci-{}", clean(b))),
            (None, Some(u)) => Some(format!("uuid-{}", clean(u))),
            (None, None) => None,
        }
    }

    /// `GPU 0 (0000:19:00.0)`.
    pub(crate) fn label(&self) -> String {
        match self.pci_bus_id.as_ref().or(self.uuid.as_ref()) {
            Some(id) => format!("GPU {} ({id})", self.ordinal),
            None => format!("GPU {}", self.ordinal),
        }
    }
}

/// A CUDA UUID as NVML writes it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(b: [u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// `0000:19:00.0`, `00000000:19:00.0` and `19:00.0` (hex, any case) all become
/// `0000:19:00.0`; `None` when it is not a bus id.
pub fn normalize_bus_id(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('\0');
    let (head, function) = text.rsplit_once('.')?;
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match parts[..] {
        [d, b, v] => (d, b, v),
        [b, v] => ("0", b, v),
        _ => return None,
    };
    let hex = |s: &str, max: u64| {
        u64::from_str_radix(s, 16)
            .ok()
            .filter(|&x| x <= max && !s.is_empty())
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain, 0xFFFF_FFFF)?,
        hex(bus, 0xFF)?,
        hex(device, 0x1F)?,
        hex(function, 0x7)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_are_normalised_and_keys_name_a_file() {
        for id in [
            "0000:19:00.0",
            "00000000:19:00.0",
            "19:00.0",
            "0000:19:00.0\0",
        ] {
            assert_eq!(
                normalize_bus_id(id).as_deref(),
                Some("0000:19:00.0"),
                "{id}"
            );
        }
        assert_eq!(
            normalize_bus_id("0000:AB:1F.7").as_deref(),
            Some("0000:ab:1f.7")
        );
        for bad in [
            "",
            "abc",
            "0000:19:00",
            "0000:19:00.9",
            "x:19:00.0",
            "1:2:3:4.0",
        ] {
            assert_eq!(normalize_bus_id(bad), None, "{bad}");
        }
        let key = DeviceKey {
            ordinal: 0,
            pci_bus_id: Some("0000:19:00.0".into()),
            uuid: Some("GPU-1234".into()),
        };
        assert_eq!(key.stem().as_deref(), Some("pci-0000-19-00.0"));
        assert_eq!(key.label(), "GPU 0 (0000:19:00.0)");
        let uuid_only = DeviceKey {
            pci_bus_id: None,
            ..key.clone()
        };
        assert_eq!(uuid_only.stem().as_deref(), Some("uuid-GPU-1234"));
        let none = DeviceKey {
            ordinal: 3,
            pci_bus_id: None,
            uuid: None,
        };
        assert_eq!((none.stem(), none.label()), (None, "GPU 3".to_string()));
    }
}
