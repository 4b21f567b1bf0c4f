//! A hint to the CPU to bring memory into its cache before it is read, for loops whose next
//! reads lie anywhere in memory (the sketches of verification's candidate pairs, the slots of a
//! long document's distinct features): asked for a few steps ahead, their cache misses overlap
//! instead of following one another.

/// Asks for every cache line of `value` (the one line of a small value; a sketch's four). A
/// hint only: it does not wait, and does nothing on CPUs other than x86-64.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        for offset in (0..std::mem::size_of_val(value)).step_by(64) {
            // SAFETY: a prefetch reads nothing the program sees; the address is inside `value`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
