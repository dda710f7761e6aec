//! The tensor backends compiled into this build, chosen at run time by name.

use std::fmt;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Burn's ndarray CPU backend.
    Ndarray,
    /// Burn's flex CPU backend.
    Flex,
    /// Burn's wgpu GPU backend (Vulkan, Metal or DirectX).
    Wgpu,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Ndarray, Backend::Flex, Backend::Wgpu];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Ndarray => "ndarray",
            Backend::Flex => "flex",
            Backend::Wgpu => "wgpu",
        }
    }

    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| {
                format!("unknown backend {name:?}; the backends are ndarray, flex and wgpu")
            })
    }

    pub fn is_compiled(self) -> bool {
        match self {
            Backend::Ndarray => cfg!(feature = "ndarray"),
            Backend::Flex => cfg!(feature = "flex"),
            Backend::Wgpu => cfg!(feature = "wgpu"),
        }
    }

    /// The order in which the default is picked: flex, the faster CPU backend on the quick
    /// preset (docs/backends.md has the measurement), then ndarray, then wgpu.
    pub const PREFERENCE: [Backend; 3] = [Backend::Flex, Backend::Ndarray, Backend::Wgpu];

    /// The default: the first compiled-in backend in [`Backend::PREFERENCE`].
    pub fn default_compiled() -> Self {
        Self::PREFERENCE
            .into_iter()
            .find(|b| b.is_compiled())
            .expect("at least one backend feature (ndarray, flex or wgpu) is enabled")
    }

    /// The device of this backend (without autodiff), or an error naming the cargo feature.
    pub fn device(self) -> Result<Device, String> {
        match self {
            #[cfg(feature = "ndarray")]
            #[allow(deprecated)]
            Backend::Ndarray => Ok(Device::ndarray()),
            #[cfg(feature = "flex")]
            Backend::Flex => Ok(Device::flex()),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => Ok(Device::wgpu(burn::tensor::DeviceKind::default())),
            #[allow(unreachable_patterns)]
            _ => Err(format!(
                "backend {self} is not compiled into this build; rebuild with `--features {self}`"
            )),
        }
    }
}

impl Backend {
    /// The device, checked by one small computation: wgpu compiled in but without a Vulkan,
    /// Metal or DirectX device panics inside Burn, which becomes an error here.
    pub fn usable_device(self) -> Result<Device, String> {
        let device = self.device()?;
        let probe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            burn::tensor::Tensor::<1>::ones([4], &device)
                .sum()
                .into_scalar::<f32>()
        }));
        match probe {
            Ok(4.0) => Ok(device),
            Ok(sum) => Err(format!("backend {self} computes 1+1+1+1 = {sum}")),
            Err(_) => Err(format!(
                "backend {self} has no usable device here (for wgpu without a GPU, install a \
                 software Vulkan driver: apt-get install mesa-vulkan-drivers)"
            )),
        }
    }
}

/// The widest vector instructions this CPU offers: `x86_64 avx512f`, `x86_64 avx2+fma`,
/// `x86_64 sse2`, or elsewhere the architecture's name. The CPU backends' kernels pick theirs at
/// run time, so a CPU run can be expected to repeat bit for bit only on a CPU of the same kind
/// (the same run on an AVX-512 and on an AVX2 machine differed at its first evaluation,
/// docs/backends.md), and its speed depends on it too.
pub fn cpu_vectors() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            "x86_64 avx512f"
        } else if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            "x86_64 avx2+fma"
        } else {
            "x86_64 sse2"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
