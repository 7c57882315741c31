//! What the model knows about a piece of state.
//!
//! When the model judges a test it drove itself, it knows every receive work
//! request, memory region and attribute. When it judges a capture of a
//! third-party conversation it does not: the observer never saw which receive
//! work requests were posted, which regions exist or what they hold. Such state
//! is [`Knowledge::Unknown`], and wherever an outcome depends on it the model
//! returns every outcome SPEC.md allows.

/// A value the model either knows or does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Knowledge<T> {
    /// The value is known.
    Known(T),
    /// The value is not known (for example, state the capture never showed).
    #[default]
    Unknown,
}

impl<T> Knowledge<T> {
    /// The value, if known.
    pub const fn known(&self) -> Option<&T> {
        match self {
            Knowledge::Known(v) => Some(v),
            Knowledge::Unknown => None,
        }
    }

    /// The value, mutably, if known.
    pub fn known_mut(&mut self) -> Option<&mut T> {
        match self {
            Knowledge::Known(v) => Some(v),
            Knowledge::Unknown => None,
        }
    }

    /// Whether the value is known.
    pub const fn is_known(&self) -> bool {
        matches!(self, Knowledge::Known(_))
    }

    /// Applies `f` to a known value; unknown stays unknown.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Knowledge<U> {
        match self {
            Knowledge::Known(v) => Knowledge::Known(f(v)),
            Knowledge::Unknown => Knowledge::Unknown,
        }
    }

    /// Borrows the value.
    pub const fn as_ref(&self) -> Knowledge<&T> {
        match self {
            Knowledge::Known(v) => Knowledge::Known(v),
            Knowledge::Unknown => Knowledge::Unknown,
        }
    }
}

impl<T: Copy> Knowledge<T> {
    /// The value, if known (by copy).
    pub const fn get(&self) -> Option<T> {
        match self {
            Knowledge::Known(v) => Some(*v),
            Knowledge::Unknown => None,
        }
    }
}

impl<T> From<Option<T>> for Knowledge<T> {
    fn from(value: Option<T>) -> Self {
        match value {
            Some(v) => Knowledge::Known(v),
            None => Knowledge::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown() {
        let k = Knowledge::Known(3);
        assert_eq!(k.get(), Some(3));
        assert_eq!(k.map(|v| v + 1), Knowledge::Known(4));
        let u: Knowledge<i32> = Knowledge::Unknown;
        assert!(!u.is_known());
        assert_eq!(u.map(|v| v + 1), Knowledge::Unknown);
        assert_eq!(Knowledge::from(Some(1)), Knowledge::Known(1));
    }
}
