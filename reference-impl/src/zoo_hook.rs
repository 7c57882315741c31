//! The `zoo!` macro: how the transport's code marks the place where a
//! mutant of the bug zoo (module `zoo`, feature `zoo`) departs from the
//! correct behaviour. Without the feature every form reduces to the correct
//! code: the value and statement forms to the correct expression alone (the
//! mutated one is not compiled), the boolean form to the constant `false`,
//! which is only ever an operand of a condition (`&& !zoo!(…)`,
//! `|| zoo!(…)`) and guards no mutant code. So the released transport
//! carries no mutant code.
//!
//! - `zoo!(selected, Name)`: whether mutant `Name` is selected (`false`
//!   without the feature);
//! - `zoo!(selected, Name => mutated, else correct)`: the value of the
//!   mutant or the correct value (`correct` without the feature);
//! - `zoo!(selected, Name => mutated)`: a statement run only by the mutant.
//!
//! `selected` is an `Option<Mutant>` expression (a `mutant` field that
//! exists only with the feature). Every use is preceded by a comment
//! `// zoo: <name>` naming the mutant.

#[cfg(feature = "zoo")]
macro_rules! zoo {
    ($selected:expr, $name:ident) => {
        $selected == Some($crate::zoo::Mutant::$name)
    };
    ($selected:expr, $name:ident => $mutated:expr, else $correct:expr) => {
        if $selected == Some($crate::zoo::Mutant::$name) {
            $mutated
        } else {
            $correct
        }
    };
    ($selected:expr, $name:ident => $mutated:expr) => {
        if $selected == Some($crate::zoo::Mutant::$name) {
            $mutated;
        }
    };
}

#[cfg(not(feature = "zoo"))]
macro_rules! zoo {
    ($selected:expr, $name:ident) => {
        false
    };
    ($selected:expr, $name:ident => $mutated:expr, else $correct:expr) => {
        $correct
    };
    ($selected:expr, $name:ident => $mutated:expr) => {
        ()
    };
}
