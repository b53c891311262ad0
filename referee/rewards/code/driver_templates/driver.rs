// referee's function_tests driver (Rust), placed after the program. Its names start with
// referee_ (a parameter named like a program's `const` would be a pattern). Its placeholders
// are filled in.
#[allow(unused_imports)]
use std::collections::*;
@STRUCT@
trait RefereeEmit {
    fn referee_emit(&self, referee_o: &mut String);
}
fn referee_string(referee_s: &str, referee_o: &mut String) {
    referee_o.push('"');
    for referee_c in referee_s.chars() {
        match referee_c {
            '"' => referee_o.push_str("\\\""),
            '\\' => referee_o.push_str("\\\\"),
            referee_c if (referee_c as u32) < 0x20 => {
                referee_o.push_str(&format!("\\u{:04x}", referee_c as u32))
            }
            referee_c => referee_o.push(referee_c),
        }
    }
    referee_o.push('"');
}
// A key that is not a string is quoted, as JSON's must be.
fn referee_key<K: RefereeEmit + ?Sized>(referee_k: &K, referee_o: &mut String) {
    let mut referee_s = String::new();
    referee_k.referee_emit(&mut referee_s);
    if referee_s.starts_with('"') {
        referee_o.push_str(&referee_s)
    } else {
        referee_string(&referee_s, referee_o)
    }
}
macro_rules! referee_ints {
    ($($t:ty),*) => { $(impl RefereeEmit for $t {
        fn referee_emit(&self, referee_o: &mut String) { referee_o.push_str(&self.to_string()); }
    })* };
}
referee_ints!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
macro_rules! referee_floats {
    ($($t:ty),*) => { $(impl RefereeEmit for $t {
        fn referee_emit(&self, referee_o: &mut String) {
            if self.is_nan() {
                referee_o.push_str("NaN")
            } else if self.is_infinite() {
                referee_o.push_str(if *self > 0.0 { "Infinity" } else { "-Infinity" })
            } else {
                referee_o.push_str(&format!("{:?}", self)) // the shortest that reads back
            }
        }
    })* };
}
referee_floats!(f32, f64);
impl RefereeEmit for bool {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push_str(if *self { "true" } else { "false" });
    }
}
impl RefereeEmit for char {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_string(&self.to_string(), referee_o);
    }
}
impl RefereeEmit for str {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_string(self, referee_o);
    }
}
impl RefereeEmit for String {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_string(self, referee_o);
    }
}
impl RefereeEmit for () {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push_str("null");
    }
}
impl<T: RefereeEmit + ?Sized> RefereeEmit for &T {
    fn referee_emit(&self, referee_o: &mut String) {
        (**self).referee_emit(referee_o);
    }
}
impl<T: RefereeEmit + ?Sized> RefereeEmit for &mut T {
    fn referee_emit(&self, referee_o: &mut String) {
        (**self).referee_emit(referee_o);
    }
}
impl<T: RefereeEmit + ?Sized> RefereeEmit for Box<T> {
    fn referee_emit(&self, referee_o: &mut String) {
        (**self).referee_emit(referee_o);
    }
}
impl<T: RefereeEmit> RefereeEmit for [T] {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push('[');
        for (referee_i, referee_item) in self.iter().enumerate() {
            if referee_i > 0 {
                referee_o.push(',');
            }
            referee_item.referee_emit(referee_o);
        }
        referee_o.push(']');
    }
}
impl<T: RefereeEmit, const N: usize> RefereeEmit for [T; N] {
    fn referee_emit(&self, referee_o: &mut String) {
        self[..].referee_emit(referee_o);
    }
}
impl<T: RefereeEmit> RefereeEmit for Vec<T> {
    fn referee_emit(&self, referee_o: &mut String) {
        self[..].referee_emit(referee_o);
    }
}
impl<T: RefereeEmit> RefereeEmit for std::collections::VecDeque<T> {
    fn referee_emit(&self, referee_o: &mut String) {
        let referee_items: Vec<&T> = self.iter().collect();
        referee_items.referee_emit(referee_o);
    }
}
impl<T: RefereeEmit> RefereeEmit for Option<T> {
    fn referee_emit(&self, referee_o: &mut String) {
        match self {
            Some(referee_v) => referee_v.referee_emit(referee_o),
            None => referee_o.push_str("null"),
        }
    }
}
impl<A: RefereeEmit> RefereeEmit for (A,) {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push('[');
        self.0.referee_emit(referee_o);
        referee_o.push(']');
    }
}
impl<A: RefereeEmit, B: RefereeEmit> RefereeEmit for (A, B) {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push('[');
        self.0.referee_emit(referee_o);
        referee_o.push(',');
        self.1.referee_emit(referee_o);
        referee_o.push(']');
    }
}
impl<A: RefereeEmit, B: RefereeEmit, C: RefereeEmit> RefereeEmit for (A, B, C) {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_o.push('[');
        self.0.referee_emit(referee_o);
        referee_o.push(',');
        self.1.referee_emit(referee_o);
        referee_o.push(',');
        self.2.referee_emit(referee_o);
        referee_o.push(']');
    }
}
fn referee_object<'a, K: RefereeEmit + 'a, V: RefereeEmit + 'a>(
    referee_items: impl Iterator<Item = (&'a K, &'a V)>,
    referee_o: &mut String,
) {
    referee_o.push('{');
    for (referee_i, (referee_k, referee_v)) in referee_items.enumerate() {
        if referee_i > 0 {
            referee_o.push(',');
        }
        referee_key(referee_k, referee_o);
        referee_o.push(':');
        referee_v.referee_emit(referee_o);
    }
    referee_o.push('}');
}
impl<K: RefereeEmit, V: RefereeEmit, S> RefereeEmit for std::collections::HashMap<K, V, S> {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_object(self.iter(), referee_o);
    }
}
impl<K: RefereeEmit, V: RefereeEmit> RefereeEmit for std::collections::BTreeMap<K, V> {
    fn referee_emit(&self, referee_o: &mut String) {
        referee_object(self.iter(), referee_o);
    }
}

#[allow(unused_mut, unused_variables, unreachable_code)]
fn main() {
    // A panic's message is the last line of stderr, where the verdict reads it.
    std::panic::set_hook(Box::new(|referee_info| eprintln!("{}", referee_info)));
    let mut referee_line = String::new();
    std::io::stdin().read_line(&mut referee_line).expect("referee: no case index");
    let referee_case: usize = referee_line.trim().parse().expect("referee: no case index");
    let mut referee_out = String::new();
    match referee_case {
@CASES@
        _ => {
            eprintln!("referee: no such case");
            std::process::exit(2);
        }
    }
    use std::io::Write;
    let mut referee_stdout = std::io::stdout();
    referee_stdout
        .write_all(format!("\n@MARKER@\n{}\n", referee_out).as_bytes())
        .expect("referee: stdout");
    referee_stdout.flush().expect("referee: stdout");
}
