impl WebAppController {
    async fn reconcile(
        &self,
        app: Arc<WebApp>,
        ctx: &Context<WebApp>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    async fn cleanup(
        &self,
        app: Arc<WebApp>,
        ctx: &Context<WebApp>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    fn error_policy(
        &self,
        app: &WebApp,
        error: &Error,
        ctx: &Context<WebApp>,
    ) -> ErrorPolicy {
        ErrorPolicy::Backoff
    }
}
#[automatically_derived]
impl kf::controller::Reconciler<WebApp> for WebAppController {
    type Error = Error;
    fn reconcile(
        &self,
        obj: ::std::sync::Arc<WebApp>,
        ctx: &kf::controller::Context<WebApp>,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<kf::controller::Action, Self::Error>,
    > + ::core::marker::Send {
        <WebAppController>::reconcile(self, obj, ctx)
    }
    fn cleanup(
        &self,
        obj: ::std::sync::Arc<WebApp>,
        ctx: &kf::controller::Context<WebApp>,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<kf::controller::Action, Self::Error>,
    > + ::core::marker::Send {
        <WebAppController>::cleanup(self, obj, ctx)
    }
    fn error_policy(
        &self,
        obj: &WebApp,
        error: &Self::Error,
        ctx: &kf::controller::Context<WebApp>,
    ) -> kf::controller::ErrorPolicy {
        <WebAppController>::error_policy(self, obj, error, ctx)
    }
}
const _: () = {
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a Kubernetes kind kubeforge can watch",
        label = "not a Kubernetes kind",
        note = "name the type #[kubeforge::custom_resource(kind = \"...\")] generates (not its spec struct), or a k8s-openapi resource such as `ConfigMap`",
        note = "a kind implements `kube::Resource<DynamicType = ()>` with a `Scoped` scope, `Clone`, `Debug`, `Serialize`, `DeserializeOwned`, `Send` and `Sync`",
        note = "a #[kubeforge::view] is a kind when it has `metadata: ObjectMeta`; a view without it is a part of one"
    )]
    trait __IsKind<M>: kf::controller::Kind {}
    trait __Unimplemented {}
    impl<T: kf::controller::Kind> __IsKind<()> for T {}
    impl<T: kf::controller::Kind + __Unimplemented> __IsKind<u8> for T {}
    struct __Wiring<__S: kf::controller::ControllerSpec, __K0, __K1, __K2, __K3, __K4> {
        controller: fn(
            &kf::controller::Wiring,
            fn(&__K4, &kf::cache::Cache) -> ::std::vec::Vec<kf::ObjectKey>,
            fn(&__K1, &kf::cache::Cache) -> ::std::vec::Vec<kf::ObjectKey>,
            fn(&__S::Kind, &__S::Kind) -> bool,
        ) -> kf::controller::Controller<__S::Kind>,
        rbac: fn() -> kf::rbac::Rules,
        kinds: ::core::marker::PhantomData<fn() -> (__K0, __K1, __K2, __K3, __K4)>,
    }
    fn __controller<
        __S: kf::controller::ControllerSpec,
        __K0: kf::controller::Kind,
        __K1: kf::controller::Kind,
        __K2: kf::controller::Kind,
        __K3: kf::controller::Kind,
        __K4: kf::controller::Kind,
    >(
        wiring: &kf::controller::Wiring,
        map0: fn(&__K4, &kf::cache::Cache) -> ::std::vec::Vec<kf::ObjectKey>,
        map1: fn(&__K1, &kf::cache::Cache) -> ::std::vec::Vec<kf::ObjectKey>,
        predicate0: fn(&__S::Kind, &__S::Kind) -> bool,
    ) -> kf::controller::Controller<__S::Kind> {
        let client = wiring.cache().client();
        let namespaces = &wiring.namespaces;
        kf::controller::Controller::new(
                <__S as kf::controller::ControllerSpec>::NAME,
                wiring,
                kf::controller::apis_for::<__S::Kind>(&client, namespaces),
                wiring.informer_defaults.clone(),
            )
            .owns_full(
                kf::controller::apis_for::<__K0>(&client, namespaces),
                kf::controller::Owns::full(),
            )
            .owns_full(
                kf::controller::apis_for::<__K1>(&client, namespaces),
                kf::controller::Owns::full(),
            )
            .owns_metadata(
                kf::controller::apis_for::<__K2>(&client, namespaces),
                kf::controller::Owns::metadata(),
            )
            .owns_uncached(
                kf::controller::apis_for::<__K3>(&client, namespaces),
                kf::controller::Owns::uncached().any_owner(),
            )
            .watches(
                kf::controller::apis_for::<__K4>(&client, namespaces),
                kf::controller::Watches::map({
                    let cache = wiring.cache().clone();
                    move |obj: &__K4| -> ::std::vec::Vec<kf::ObjectKey> {
                        map0(obj, &cache)
                    }
                }),
            )
            .watches(
                kf::controller::apis_for::<__K1>(&client, namespaces),
                kf::controller::Watches::map({
                    let cache = wiring.cache().clone();
                    move |obj: &__K1| -> ::std::vec::Vec<kf::ObjectKey> {
                        map1(obj, &cache)
                    }
                }),
            )
            .predicate(kf::controller::GenerationChanged)
            .predicate(predicate0)
            .config(
                kf::controller::ControllerConfig::default()
                    .concurrency(2)
                    .finalizer("apps.example.com/cleanup")
                    .retry(
                        kf::retry::ExponentialRetry::new(
                            ::core::time::Duration::from_millis(1000),
                            ::core::time::Duration::from_millis(300000),
                            10,
                        ),
                    )
                    .dequeue(kf::retry::DequeueOnGeneration),
            )
    }
    fn __rbac<
        __S: kf::controller::ControllerSpec,
        __K0: kf::controller::Kind,
        __K1: kf::controller::Kind,
        __K2: kf::controller::Kind,
        __K3: kf::controller::Kind,
        __K4: kf::controller::Kind,
    >() -> kf::rbac::Rules {
        kf::rbac::Rules::new()
            .primary::<__S::Kind>(true)
            .owned::<__K0>()
            .owned::<__K1>()
            .owned::<__K2>()
            .owned::<__K3>()
            .watched::<__K4>()
            .watched::<__K1>()
            .events()
            .leases()
    }
    const fn __wiring<
        __S: kf::controller::ControllerSpec,
        __K0: __IsKind<__M0>,
        __M0,
        __K1: __IsKind<__M1>,
        __M1,
        __K2: __IsKind<__M2>,
        __M2,
        __K3: __IsKind<__M3>,
        __M3,
        __K4: __IsKind<__M4>,
        __M4,
    >() -> __Wiring<__S, __K0, __K1, __K2, __K3, __K4> {
        __Wiring {
            controller: __controller::<__S, __K0, __K1, __K2, __K3, __K4>,
            rbac: __rbac::<__S, __K0, __K1, __K2, __K3, __K4>,
            kinds: ::core::marker::PhantomData,
        }
    }
    const __WIRING: __Wiring<
        WebAppController,
        Deployment,
        Service,
        Pod,
        ConfigMap,
        Secret,
    > = __wiring::<
        WebAppController,
        Deployment,
        _,
        Service,
        _,
        Pod,
        _,
        ConfigMap,
        _,
        Secret,
        _,
    >();
    #[automatically_derived]
    impl kf::controller::ControllerSpec for WebAppController {
        type Kind = WebApp;
        const NAME: &'static str = "webapp";
        const FINALIZER: ::core::option::Option<&'static str> = ::core::option::Option::Some(
            "apps.example.com/cleanup",
        );
        fn controller(
            wiring: &kf::controller::Wiring,
        ) -> kf::controller::Controller<Self::Kind> {
            (__WIRING
                .controller)(
                wiring,
                Self::apps_for_secret,
                Self::apps_for_service,
                Self::changed,
            )
        }
        fn rbac() -> kf::rbac::Rules {
            (__WIRING.rbac)()
        }
    }
};
kf::__private::inventory::submit! {
    kf::rbac::ControllerRegistration { name : "webapp", rules : < WebAppController as
    kf::controller::ControllerSpec > ::rbac, }
}
