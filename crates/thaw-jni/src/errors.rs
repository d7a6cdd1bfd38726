//! How failures cross into Java: a Thaw error as `io.thaw.client.ThawException`
//! (its kind and message), anything else as a `RuntimeException`.

use jni::errors::{Error as JniError, ErrorPolicy};
use jni::objects::{JObject, JThrowable, JValue};
use jni::{Env, jni_sig, jni_str};
use thaw_common::ThawError;

pub enum Failure {
    Thaw(ThawError),
    Jni(JniError),
}

pub type Result<T> = std::result::Result<T, Failure>;

impl From<JniError> for Failure {
    fn from(e: JniError) -> Self {
        Failure::Jni(e)
    }
}

impl From<ThawError> for Failure {
    fn from(e: ThawError) -> Self {
        Failure::Thaw(e)
    }
}

/// An invalid argument from Java (a bad option, a negative length).
pub fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Thaw(ThawError::invalid(msg.into()))
}

/// The error policy of every native method: throws, and returns the
/// default value (null, 0), which Java never sees.
pub struct Throw;

fn throw_thaw(env: &mut Env<'_>, e: &ThawError) -> jni::errors::Result<()> {
    let kind = env.new_string(e.kind.as_str())?;
    let msg = env.new_string(&e.message)?;
    let obj: JObject = env.new_object(
        jni_str!("io/thaw/client/ThawException"),
        jni_sig!("(Ljava/lang/String;Ljava/lang/String;)V"),
        &[JValue::Object(&kind), JValue::Object(&msg)],
    )?;
    // SAFETY: a ThawException is a Throwable.
    let t = unsafe { JThrowable::from_raw(env, obj.into_raw()) };
    match env.throw(t) {
        Err(JniError::JavaException) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

fn throw_runtime(env: &mut Env<'_>, msg: &str) {
    let _ = env.throw_new(jni_str!("java/lang/RuntimeException"), jni::strings::JNIString::from(msg));
}

impl<T: Default> ErrorPolicy<T, Failure> for Throw {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut Self::Captures<'unowned_env_local, 'native_method>,
        err: Failure,
    ) -> jni::errors::Result<T> {
        if env.exception_check() {
            return Ok(T::default());
        }
        match err {
            Failure::Thaw(e) => {
                if throw_thaw(env, &e).is_err() && !env.exception_check() {
                    throw_runtime(env, &format!("Thaw: {e}"));
                }
            }
            Failure::Jni(e) => throw_runtime(env, &format!("Thaw native call failed: {e}")),
        }
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut Self::Captures<'unowned_env_local, 'native_method>,
        payload: Box<dyn std::any::Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        // Leak the payload rather than risk a panic while dropping it.
        std::mem::forget(payload);
        if !env.exception_check() {
            throw_runtime(env, &format!("Thaw native client panicked: {what}"));
        }
        Ok(T::default())
    }
}
