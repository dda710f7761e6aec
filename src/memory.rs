//! How the process's allocator treats freed memory.
//!
//! A training step allocates a fresh buffer for every intermediate tensor (megabytes each at the
//! presets' sizes) and frees it soon after. glibc's malloc serves blocks that large with `mmap`
//! and gives them back to the kernel on `free` (or trims them off the heap's top), so the next
//! step pays again for page faults and zeroed pages: about a sixth of a quick-preset step's CPU
//! time (docs/performance.md). Keeping freed memory in the process avoids that; its cost is that
//! the resident size stays at the peak, which a training run reaches in its first step anyway.

/// Keeps freed memory for reuse instead of returning it to the kernel (glibc on Linux; other
/// platforms' allocators are left as they are).
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // Blocks below 1 GiB come from the heap, not from their own mapping, and the heap is
        // never trimmed. `mallopt` returns 0 on failure, which leaves glibc's defaults: slower,
        // not wrong, so it is not an error.
        const ONE_GIB: libc::c_int = 1 << 30;
        // SAFETY: mallopt only changes allocator parameters; it is called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, ONE_GIB);
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        }
    }
}
