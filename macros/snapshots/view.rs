#[derive(
    ::core::clone::Clone,
    ::core::fmt::Debug,
    ::core::default::Default,
    ::core::cmp::PartialEq,
    ::kubeforge::__private::serde::Serialize,
    ::kubeforge::__private::serde::Deserialize
)]
#[serde(crate = "::kubeforge::__private::serde", rename_all = "camelCase", default)]
pub struct PodView {
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpecView>,
    pub labels: BTreeMap<String, String>,
}
impl ::kubeforge::views::ViewOf<Pod> for PodView {
    fn project(__full: &Pod) -> Self {
        Self {
            metadata: ::kubeforge::views::__leaf::<_, ObjectMeta>(&__full.metadata),
            spec: ::kubeforge::views::__option(
                &__full.spec,
                |__v0| ::kubeforge::views::__leaf::<_, PodSpecView>(__v0),
            ),
            labels: ::kubeforge::views::__map(
                &__full.labels,
                |__v0| ::kubeforge::views::__leaf::<_, String>(__v0),
            ),
        }
    }
}
impl PodView {
    /// The view's fields of `full` (every other field left out).
    #[allow(dead_code)]
    pub fn project(full: &Pod) -> Self {
        <Self as ::kubeforge::views::ViewOf<Pod>>::project(full)
    }
}
impl ::core::convert::From<&Pod> for PodView {
    fn from(full: &Pod) -> Self {
        <Self as ::kubeforge::views::ViewOf<Pod>>::project(full)
    }
}
impl ::kubeforge::__private::kube::Resource for PodView {
    type DynamicType = ();
    type Scope = <Pod as ::kubeforge::__private::kube::Resource>::Scope;
    fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
        <Pod as ::kubeforge::__private::kube::Resource>::kind(&())
    }
    fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
        <Pod as ::kubeforge::__private::kube::Resource>::group(&())
    }
    fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
        <Pod as ::kubeforge::__private::kube::Resource>::version(&())
    }
    fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
        <Pod as ::kubeforge::__private::kube::Resource>::api_version(&())
    }
    fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
        <Pod as ::kubeforge::__private::kube::Resource>::plural(&())
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
impl ::kubeforge::views::View for PodView {
    type Full = Pod;
}
