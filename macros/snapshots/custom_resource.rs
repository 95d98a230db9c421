#[derive(
    ::kubeforge::__private::serde::Serialize,
    ::kubeforge::__private::serde::Deserialize,
    ::kubeforge::__private::schemars::JsonSchema
)]
#[serde(crate = "::kubeforge::__private::serde")]
#[schemars(crate = "::kubeforge::__private::schemars")]
#[schemars(
    extend(
        "x-kubernetes-validations" = [{"message":"not negative",
        "rule":"self.replicas >= 0",
        "x-kubeforge-cost":3}]
    )
)]
/// Spec.
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// Number of pods.
    #[schemars(extend("maximum" = 100, "minimum" = 1))]
    pub replicas: i32,
    #[serde(default)]
    pub image_name: Option<String>,
}
impl ::kubeforge::__private::garde::Validate for WebAppSpec {
    type Context = ();
    #[allow(unused_variables, unused_mut, clippy::redundant_closure)]
    fn validate_into(
        &self,
        __ctx: &(),
        __parent: &mut dyn ::core::ops::FnMut() -> ::kubeforge::__private::garde::Path,
        __report: &mut ::kubeforge::__private::garde::Report,
    ) {
        {
            let mut __path = || __parent().join("replicas");
            const __CHECKS: ::kubeforge::crd::__checks::Checks = ::kubeforge::crd::__checks::Checks {
                minimum: ::core::option::Option::Some(1f64),
                maximum: ::core::option::Option::Some(100f64),
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
                &self.replicas,
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
                (&::kubeforge::crd::__checks::Dive(&self.replicas))
                    .dive(&mut __path, __report);
            }
        }
        {
            let mut __path = || __parent().join("imageName");
            {
                #[allow(unused_imports)]
                use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
                (&::kubeforge::crd::__checks::Dive(&self.image_name))
                    .dive(&mut __path, __report);
            }
        }
    }
}
impl ::kubeforge::crd::__checks::JsonField<13652072405990351292u64> for WebAppSpec {
    type Ty = i32;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::Integer;
}
impl ::kubeforge::crd::__checks::JsonField<13699452588724271873u64> for WebAppSpec {
    type Ty = String;
    const SHAPE: ::kubeforge::crd::__checks::JsonShape = ::kubeforge::crd::__checks::JsonShape::String;
}
impl ::kubeforge::crd::__checks::JsonFields for WebAppSpec {
    const TYPE: &'static str = "WebAppSpec";
    const FIELDS: &'static [(&'static str, ::kubeforge::crd::__checks::JsonShape)] = &[
        ("replicas", ::kubeforge::crd::__checks::JsonShape::Integer),
        ("imageName", ::kubeforge::crd::__checks::JsonShape::String),
    ];
    const NAMES: &'static str = "replicas, imageName";
    const OPEN: bool = false;
}
const _: () = {
    let _ = ::core::marker::PhantomData::<
        <WebAppSpec as ::kubeforge::crd::__checks::JsonField<
            13652072405990351292u64,
        >>::Ty,
    >;
    if !<WebAppSpec as ::kubeforge::crd::__checks::JsonField<
        13652072405990351292u64,
    >>::SHAPE
        .is_one_of(&[::kubeforge::crd::__checks::JsonShape::Integer])
    {
        ::core::panic!(
            "printer column `Replicas` has type integer, but `.spec.replicas` is not an integer"
        );
    }
};
const _: () = {
    let _ = ::core::marker::PhantomData::<
        <WebAppSpec as ::kubeforge::crd::__checks::JsonField<
            13652072405990351292u64,
        >>::Ty,
    >;
    if !<WebAppSpec as ::kubeforge::crd::__checks::JsonField<
        13652072405990351292u64,
    >>::SHAPE
        .is_one_of(&[::kubeforge::crd::__checks::JsonShape::Integer])
    {
        ::core::panic!(
            "the scale spec replicas path `.spec.replicas` must be an integer"
        );
    }
};
const _: () = {
    let _ = ::core::marker::PhantomData::<
        <WebAppStatus as ::kubeforge::crd::__checks::JsonField<
            13652072405990351292u64,
        >>::Ty,
    >;
    if !<WebAppStatus as ::kubeforge::crd::__checks::JsonField<
        13652072405990351292u64,
    >>::SHAPE
        .is_one_of(&[::kubeforge::crd::__checks::JsonShape::Integer])
    {
        ::core::panic!(
            "the scale status replicas path `.status.replicas` must be an integer"
        );
    }
};
///The `WebApp` kind (`apps.example.com/v1`), generated by `#[custom_resource]` from [`WebAppSpec`].
#[derive(
    ::core::clone::Clone,
    ::core::fmt::Debug,
    ::kubeforge::__private::serde::Deserialize
)]
#[serde(crate = "::kubeforge::__private::serde")]
pub struct WebApp {
    /// Standard object metadata (name, namespace, labels, ...).
    #[serde(default)]
    pub metadata: ::kubeforge::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// The desired state.
    pub spec: WebAppSpec,
    /// The observed state, written by the controller through the status subresource.
    #[serde(default, skip_serializing_if = "::core::option::Option::is_none")]
    pub status: ::core::option::Option<WebAppStatus>,
}
impl WebApp {
    /// A new object named `name` with `spec` and no status.
    #[must_use]
    pub fn new(name: &str, spec: WebAppSpec) -> Self {
        Self {
            metadata: ::kubeforge::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: ::core::option::Option::Some(
                    ::std::string::ToString::to_string(name),
                ),
                ..::core::default::Default::default()
            },
            spec,
            status: ::core::option::Option::None,
        }
    }
    /// The CustomResourceDefinition of this version of the kind.
    #[must_use]
    pub fn crd() -> ::kubeforge::__private::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
        <Self as ::kubeforge::crd::CustomResource>::crd()
    }
}
impl ::kubeforge::__private::serde::Serialize for WebApp {
    fn serialize<__S: ::kubeforge::__private::serde::Serializer>(
        &self,
        __serializer: __S,
    ) -> ::core::result::Result<__S::Ok, __S::Error> {
        use ::kubeforge::__private::serde::ser::SerializeStruct as _;
        let mut __s = __serializer.serialize_struct("WebApp", 5usize)?;
        __s.serialize_field("apiVersion", "apps.example.com/v1")?;
        __s.serialize_field("kind", "WebApp")?;
        __s.serialize_field("metadata", &self.metadata)?;
        __s.serialize_field("spec", &self.spec)?;
        match &self.status {
            ::core::option::Option::Some(status) => {
                __s.serialize_field("status", status)?
            }
            ::core::option::Option::None => __s.skip_field("status")?,
        }
        __s.end()
    }
}
impl ::kubeforge::__private::schemars::JsonSchema for WebApp {
    fn schema_name() -> ::std::borrow::Cow<'static, str> {
        ::std::borrow::Cow::Borrowed("WebApp")
    }
    fn json_schema(
        __generator: &mut ::kubeforge::__private::schemars::SchemaGenerator,
    ) -> ::kubeforge::__private::schemars::Schema {
        ::kubeforge::__private::schemars::json_schema!(
            { "type" : "object", "required" : ["spec"], "properties" : { "apiVersion" : {
            "type" : "string" }, "kind" : { "type" : "string" }, "metadata" : __generator
            .subschema_for:: <
            ::kubeforge::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta
            > (), "spec" : __generator.subschema_for:: < WebAppSpec > (), "status" :
            __generator.subschema_for:: < ::core::option::Option < WebAppStatus >> (), }
            }
        )
    }
}
impl ::kubeforge::__private::kube::Resource for WebApp {
    type DynamicType = ();
    type Scope = ::kubeforge::__private::k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
        ::std::borrow::Cow::Borrowed("WebApp")
    }
    fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
        ::std::borrow::Cow::Borrowed("apps.example.com")
    }
    fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
        ::std::borrow::Cow::Borrowed("v1")
    }
    fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
        ::std::borrow::Cow::Borrowed("apps.example.com/v1")
    }
    fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
        ::std::borrow::Cow::Borrowed("webapps")
    }
    fn meta(
        &self,
    ) -> &::kubeforge::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(
        &mut self,
    ) -> &mut ::kubeforge::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}
impl ::kubeforge::views::Writable for WebApp {}
impl ::kubeforge::__private::kube::CustomResourceExt for WebApp {
    fn crd() -> ::kubeforge::__private::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
        <Self as ::kubeforge::crd::CustomResource>::crd()
    }
    fn crd_name() -> &'static str {
        "webapps.apps.example.com"
    }
    fn api_resource() -> ::kubeforge::__private::kube::core::ApiResource {
        ::kubeforge::__private::kube::core::ApiResource::erase::<Self>(&())
    }
    fn shortnames() -> &'static [&'static str] {
        &["wa"]
    }
}
impl ::kubeforge::__private::kube::core::object::HasSpec for WebApp {
    type Spec = WebAppSpec;
    fn spec(&self) -> &WebAppSpec {
        &self.spec
    }
    fn spec_mut(&mut self) -> &mut WebAppSpec {
        &mut self.spec
    }
}
impl ::kubeforge::__private::kube::core::object::HasStatus for WebApp {
    type Status = WebAppStatus;
    fn status(&self) -> ::core::option::Option<&WebAppStatus> {
        self.status.as_ref()
    }
    fn status_mut(&mut self) -> &mut ::core::option::Option<WebAppStatus> {
        &mut self.status
    }
}
impl ::kubeforge::crd::CustomResource for WebApp {
    type Spec = WebAppSpec;
    type Status = WebAppStatus;
    const INFO: ::kubeforge::crd::KindInfo = ::kubeforge::crd::KindInfo {
        group: "apps.example.com",
        version: "v1",
        kind: "WebApp",
        plural: "webapps",
        singular: "webapp",
        short_names: &["wa"],
        categories: &[],
        namespaced: true,
        served: true,
        storage: true,
        deprecated: ::core::option::Option::None,
        status_subresource: true,
        scale: ::core::option::Option::Some(::kubeforge::crd::ScaleInfo {
            spec_replicas_path: ".spec.replicas",
            status_replicas_path: ".status.replicas",
            label_selector_path: ::core::option::Option::None,
        }),
        printer_columns: &[
            ::kubeforge::crd::PrinterColumnInfo {
                name: "Replicas",
                type_: "integer",
                json_path: ".spec.replicas",
                format: ::core::option::Option::None,
                description: ::core::option::Option::None,
                priority: 0i32,
            },
        ],
        selectable_fields: &[],
        labels: &[],
        annotations: &[],
    };
    fn schema() -> ::kubeforge::__private::serde_json::Value {
        ::kubeforge::crd::kind_schema(
            ::kubeforge::crd::raw_schema::<WebAppSpec>(),
            ::core::option::Option::Some(::kubeforge::crd::raw_schema::<WebAppStatus>()),
            ::std::vec![],
        )
    }
}
impl ::kubeforge::__private::garde::Validate for WebApp {
    type Context = ::kubeforge::crd::ValidationContext;
    #[allow(clippy::redundant_closure)]
    fn validate_into(
        &self,
        __ctx: &::kubeforge::crd::ValidationContext,
        __parent: &mut dyn ::core::ops::FnMut() -> ::kubeforge::__private::garde::Path,
        __report: &mut ::kubeforge::__private::garde::Report,
    ) {
        let __markers_from = __report.iter().count();
        {
            let mut __path = || __parent().join("spec");
            ::kubeforge::__private::garde::Validate::validate_into(
                &self.spec,
                &(),
                &mut __path,
                __report,
            );
        }
        {
            let mut __path = || __parent().join("status");
            #[allow(unused_imports)]
            use ::kubeforge::crd::__checks::{DiveNone as _, DiveValidate as _};
            (&::kubeforge::crd::__checks::Dive(&self.status))
                .dive(&mut __path, __report);
        }
        static __RULES: ::std::sync::OnceLock<::kubeforge::crd::__checks::KindRules> = ::std::sync::OnceLock::new();
        __RULES
            .get_or_init(|| {
                ::kubeforge::crd::__checks::KindRules::new(
                    &<Self as ::kubeforge::crd::CustomResource>::schema(),
                )
            })
            .check(self, __ctx, __parent, __report, __markers_from);
    }
}
::kubeforge::__private::inventory::submit! {
    ::kubeforge::crd::Registration { crd : < WebApp as ::kubeforge::crd::CustomResource >
    ::crd, schema : < WebApp as ::kubeforge::crd::CustomResource > ::schema, }
}
::kubeforge::__private::inventory::submit! {
    ::kubeforge::webhook::Registration { webhooks : { fn __kubeforge_webhooks() ->
    ::kubeforge::webhook::KindWebhooks { #[allow(unused_imports)] use
    ::kubeforge::webhook::__private:: { NoDefaulter as _, NoDeleteValidator as _,
    NoValidator as _, ViaDefaulter as _, ViaDeleteValidator as _, ViaValidator as _, };
    let probe = ::kubeforge::webhook::__private::Probe:: < WebApp > ::new();
    ::kubeforge::webhook::KindWebhooks { group : "apps.example.com", version : "v1", kind
    : "WebApp", plural : "webapps", namespaced : true, hooks :
    ::kubeforge::webhook::__private::hooks((&& probe).validator(), (&& probe)
    .delete_validator(), (&& probe).defaulter(),), settings :
    ::kubeforge::webhook::Settings { failure_policy : "Fail", side_effects : "None",
    timeout_seconds : 10u8, operations : & ["CREATE", "UPDATE"], match_policy :
    "Equivalent", reinvocation_policy : "IfNeeded", metadata_updates : false,
    namespace_selector : ::core::option::Option::None, object_selector :
    ::core::option::Option::None, }, } } __kubeforge_webhooks }, }
}
