#[derive(
    ::kubeforge::__private::serde::Serialize,
    ::kubeforge::__private::serde::Deserialize,
    ::kubeforge::__private::schemars::JsonSchema
)]
#[serde(crate = "::kubeforge::__private::serde")]
#[schemars(crate = "::kubeforge::__private::schemars")]
#[schemars(
    extend(
        "x-kubernetes-validations" = [{"rule":"self.a <= self.b",
        "x-kubeforge-cost":5}]
    )
)]
#[derive(Clone, Debug)]
pub struct Range {
    #[schemars(extend("minimum" = 0))]
    pub a: i64,
    #[schemars(extend("maxLength" = 8, "pattern" = "^x"))]
    pub name: String,
    pub b: i64,
    #[serde(skip)]
    pub cache: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("minItems" = 1))]
    pub hosts: Vec<String>,
}
impl ::kubeforge::__private::garde::Validate for Range {
    type Context = ();
    #[allow(unused_variables, unused_mut, clippy::redundant_closure)]
    fn validate_into(
        &self,
        __ctx: &(),
        __parent: &mut dyn ::core::ops::FnMut() -> ::kubeforge::__private::garde::Path,
        __report: &mut ::kubeforge::__private::garde::Report,
    ) {
        {
            let mut __path = || __parent().join("a");
            const __CHECKS: ::kubeforge::crd::__checks::Checks = ::kubeforge::crd::__checks::Checks {
                minimum: ::core::option::Option::Some(0f64),
                maximum: ::core::option::Option::None,
                exclusive_minimum: false,
                exclusive_maximum: false,
                multiple_of: ::core::option::Option::None,
                min_length: ::core::option::Option::None,
                max_length: ::core::option::Option::None,
                pattern: ::core::option::Option::None,
                enum_values: ::core::option::Option::None,
                format: ::core::option::Option::None,
                min_items: ::core::option::Option::None,
                max_items: ::core::option::Option::None,
                unique_items: false,
                min_properties: ::core::option::Option::None,
                max_properties: ::core::option::Option::None,
                items: ::core::option::Option::None,
                values: ::core::option::Option::None,
                type_: ::core::option::Option::None,
                required: false,
            };
            let __value = ::kubeforge::crd::__checks::to_json(
                &self.a,
                &mut __path,
                __report,
            );
            ::kubeforge::crd::__checks::check(
                &__value,
                &__CHECKS,
                &mut __path,
                __report,
            );
            {
                #[allow(unused_imports)]
                use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
                (&::kubeforge::crd::__checks::Dive(&self.a)).dive(&mut __path, __report);
            }
        }
        {
            let mut __path = || __parent().join("name");
            const __CHECKS: ::kubeforge::crd::__checks::Checks = ::kubeforge::crd::__checks::Checks {
                minimum: ::core::option::Option::None,
                maximum: ::core::option::Option::None,
                exclusive_minimum: false,
                exclusive_maximum: false,
                multiple_of: ::core::option::Option::None,
                min_length: ::core::option::Option::None,
                max_length: ::core::option::Option::Some(8u64),
                pattern: ::core::option::Option::Some("^x"),
                enum_values: ::core::option::Option::None,
                format: ::core::option::Option::None,
                min_items: ::core::option::Option::None,
                max_items: ::core::option::Option::None,
                unique_items: false,
                min_properties: ::core::option::Option::None,
                max_properties: ::core::option::Option::None,
                items: ::core::option::Option::None,
                values: ::core::option::Option::None,
                type_: ::core::option::Option::None,
                required: false,
            };
            let __value = ::kubeforge::crd::__checks::to_json(
                &self.name,
                &mut __path,
                __report,
            );
            ::kubeforge::crd::__checks::check(
                &__value,
                &__CHECKS,
                &mut __path,
                __report,
            );
            {
                #[allow(unused_imports)]
                use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
                (&::kubeforge::crd::__checks::Dive(&self.name))
                    .dive(&mut __path, __report);
            }
        }
        {
            let mut __path = || __parent().join("b");
            {
                #[allow(unused_imports)]
                use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
                (&::kubeforge::crd::__checks::Dive(&self.b)).dive(&mut __path, __report);
            }
        }
        {
            let mut __path = || __parent().join("hosts");
            const __CHECKS: ::kubeforge::crd::__checks::Checks = ::kubeforge::crd::__checks::Checks {
                minimum: ::core::option::Option::None,
                maximum: ::core::option::Option::None,
                exclusive_minimum: false,
                exclusive_maximum: false,
                multiple_of: ::core::option::Option::None,
                min_length: ::core::option::Option::None,
                max_length: ::core::option::Option::None,
                pattern: ::core::option::Option::None,
                enum_values: ::core::option::Option::None,
                format: ::core::option::Option::None,
                min_items: ::core::option::Option::Some(1u64),
                max_items: ::core::option::Option::None,
                unique_items: false,
                min_properties: ::core::option::Option::None,
                max_properties: ::core::option::Option::None,
                items: ::core::option::Option::None,
                values: ::core::option::Option::None,
                type_: ::core::option::Option::None,
                required: false,
            };
            let __value = if Vec::is_empty(&self.hosts) {
                ::kubeforge::crd::__checks::ABSENT
            } else {
                ::kubeforge::crd::__checks::to_json(&self.hosts, &mut __path, __report)
            };
            ::kubeforge::crd::__checks::check(
                &__value,
                &__CHECKS,
                &mut __path,
                __report,
            );
            if !Vec::is_empty(&self.hosts) {
                #[allow(unused_imports)]
                use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
                (&::kubeforge::crd::__checks::Dive(&self.hosts))
                    .dive(&mut __path, __report);
            }
        }
    }
}
impl ::kubeforge::crd::__checks::JsonField<12638187200555641996u64> for Range {
    type Ty = i64;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::Integer;
}
impl ::kubeforge::crd::__checks::JsonField<14176396743819860870u64> for Range {
    type Ty = String;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::String;
}
impl ::kubeforge::crd::__checks::JsonField<12638190499090526629u64> for Range {
    type Ty = i64;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::Integer;
}
impl ::kubeforge::crd::__checks::JsonField<4262902767818901140u64> for Range {
    type Ty = Vec<String>;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::Array;
}
impl ::kubeforge::crd::__checks::JsonFields for Range {
    const TYPE: &'static str = "Range";
    const FIELDS: &'static [(&'static str, ::kubeforge::crd::__checks::JsonShape)] = &[
        ("a", ::kubeforge::crd::__checks::JsonShape::Integer),
        ("name", ::kubeforge::crd::__checks::JsonShape::String),
        ("b", ::kubeforge::crd::__checks::JsonShape::Integer),
        ("hosts", ::kubeforge::crd::__checks::JsonShape::Array),
    ];
    const NAMES: &'static str = "a, name, b, hosts";
    const OPEN: bool = false;
}
