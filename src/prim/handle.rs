//! The owned handle every verbs object is built on: the raw pointer, what
//! the object keeps alive, and its destruction, written once.
//!
//! A public type is `Owned<Data>` (one owner: `Dm`, `Mw`, `CmId`) or
//! `Arc<Owned<Data>>` (shared by clones and children: `Pd`, `Cq`, ...).
//! `Data` holds the parents by value (each an `Arc` handle), so they are
//! released after the object, and implements [`Destroy`]: the verb that
//! destroys it and what must never be freed when that verb fails.
//! `as_ptr()` is one field load; nothing here runs on the data path.

use std::ops::Deref;
use std::ptr::NonNull;

/// How a verbs object is destroyed, and what it keeps beside its pointer.
///
/// # Safety
/// An implementation asserts that [`Destroy::destroy`] is the verb that
/// releases objects of type `Raw` made by the matching create verb, and that
/// such an object may be used, shared and destroyed from any thread through
/// the calls its public handle offers (this gives `Owned<Self>` its `Send`
/// and `Sync`, as far as `Self` is `Send` and `Sync`). Each implementation
/// states why in its `// SAFETY:` comment.
pub(crate) unsafe trait Destroy {
    /// The C object.
    type Raw;
    /// The destroying C function, named in the destroy-failure report.
    const VERB: &'static str;
    /// Destroys `raw`, giving the C return code (0 on success).
    ///
    /// # Safety
    /// `raw` is the live object this value belongs to; it is destroyed once.
    unsafe fn destroy(&mut self, raw: NonNull<Self::Raw>) -> i32;
    /// Called after a failed destroy: forget (never free) whatever the device
    /// may still reach. The object itself stays in place; the failure is
    /// counted by [`super::destroy_failures`].
    fn keep_on_failure(&mut self) {}
}

/// An owned verbs object: its pointer and its data, destroyed on drop
/// (then the data drops: parents go after the object).
pub(crate) struct Owned<T: Destroy> {
    raw: NonNull<T::Raw>,
    data: T,
}

impl<T: Destroy> Owned<T> {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    /// `raw` comes from the create verb matching `T::destroy`, is owned by
    /// nothing else, and `data` holds what it depends on.
    pub(crate) unsafe fn new(raw: NonNull<T::Raw>, data: T) -> Owned<T> {
        Owned { raw, data }
    }

    /// The raw object.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *mut T::Raw {
        self.raw.as_ptr()
    }

    /// The raw object, non-null.
    #[inline]
    pub(crate) fn raw(&self) -> NonNull<T::Raw> {
        self.raw
    }

    /// What the object keeps, mutably (only while it has one owner).
    pub(crate) fn data_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

impl<T: Destroy> Deref for Owned<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: Destroy> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `new`'s contract: the object is ours, alive, and this is
        // its only destruction (children hold an `Arc` to their parents'
        // handles, so none is alive any more).
        let rc = unsafe { self.data.destroy(self.raw) };
        if rc != 0 {
            self.data.keep_on_failure();
            super::error::count_destroy_failure(T::VERB, rc);
        }
    }
}

// SAFETY: the pointer is the only non-`Send` part; `Destroy`'s contract
// says the object may move to and be destroyed on any thread.
unsafe impl<T: Destroy + Send> Send for Owned<T> {}
// SAFETY: `Destroy`'s contract says shared use through the handle's calls
// is thread-safe; the data is `Sync` itself.
unsafe impl<T: Destroy + Sync> Sync for Owned<T> {}
