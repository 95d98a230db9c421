impl DatabaseController {
    fn password(&self, db: &Database, ctx: &Context<Database>) -> Secret {
        Secret::default()
    }
    fn service(&self, db: &Database, ctx: &Context<Database>) -> Service {
        Service::default()
    }
    async fn statefulset(
        &self,
        db: &Database,
        ctx: &Context<Database>,
    ) -> Result<StatefulSet, BoxError> {
        Ok(StatefulSet::default())
    }
    fn backup(&self, db: &Database, ctx: &Context<Database>) -> anyhow::Result<CronJob> {
        Ok(CronJob::default())
    }
    fn has_backup(&self, db: &Database) -> bool {
        true
    }
    fn status(&self, db: &Database, done: &Reconciled, status: &mut DatabaseStatus) {}
    async fn cleanup(
        &self,
        db: Arc<Database>,
        ctx: &Context<Database>,
    ) -> Result<Action, BoxError> {
        Ok(Action::Done)
    }
}
const _: () = {
    #[automatically_derived]
    impl kf::controller::Reconciler<Database> for DatabaseController {
        type Error = BoxError;
        fn reconcile(
            &self,
            obj: ::std::sync::Arc<Database>,
            ctx: &kf::controller::Context<Database>,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<kf::controller::Action, Self::Error>,
        > + ::core::marker::Send {
            static DEPENDENTS: ::std::sync::OnceLock<
                kf::dependents::Dependents<Database, DatabaseController>,
            > = ::std::sync::OnceLock::new();
            async move {
                let dependents = DEPENDENTS
                    .get_or_init(|| (__WIRING
                        .dependents)(
                        <DatabaseController>::password,
                        <DatabaseController>::service,
                        <Service as kf::dependents::Readiness>::is_ready,
                        __dependent_statefulset,
                        sts_ready,
                        <DatabaseController>::backup,
                        <DatabaseController>::has_backup,
                        paused,
                    ));
                let done = dependents
                    .run(
                        self,
                        &obj,
                        ctx,
                        |done: &kf::dependents::Reconciled, status: &mut _| <DatabaseController>::status(
                            self,
                            &obj,
                            done,
                            status,
                        ),
                    )
                    .await?;
                ::core::result::Result::Ok(done.action())
            }
        }
        fn cleanup(
            &self,
            obj: ::std::sync::Arc<Database>,
            ctx: &kf::controller::Context<Database>,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<kf::controller::Action, Self::Error>,
        > + ::core::marker::Send {
            <DatabaseController>::cleanup(self, obj, ctx)
        }
    }
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
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a Kubernetes kind kubeforge can write",
        label = "not a writable Kubernetes kind",
        note = "a dependent's child is a full kind kubeforge applies: a type #[kubeforge::custom_resource(kind = \"...\")] generates, a k8s-openapi resource such as `ConfigMap`, or a kind written by hand with `impl kubeforge::views::Writable for MyKind {{}}`",
        note = "a #[kubeforge::view] is read-only (writing it would erase the fields it lacks): build the full type it views"
    )]
    trait __IsChild<M>: __IsKind<M> + kf::views::Writable {}
    impl<T: kf::controller::Kind + kf::views::Writable> __IsChild<()> for T {}
    impl<T: kf::controller::Kind + kf::views::Writable + __Unimplemented> __IsChild<u8>
    for T {}
    struct __Wiring<__S: kf::controller::ControllerSpec, __K0, __K1, __K2, __K3> {
        controller: fn(&kf::controller::Wiring) -> kf::controller::Controller<__S::Kind>,
        rbac: fn() -> kf::rbac::Rules,
        dependents: fn(
            fn(&__S, &__S::Kind, &kf::controller::Context<__S::Kind>) -> __K1,
            fn(&__S, &__S::Kind, &kf::controller::Context<__S::Kind>) -> __K0,
            fn(&__K0) -> bool,
            for<'a> fn(
                &'a __S,
                &'a __S::Kind,
                &'a kf::controller::Context<__S::Kind>,
            ) -> ::core::pin::Pin<
                ::std::boxed::Box<
                    dyn ::core::future::Future<
                        Output = Result<__K2, BoxError>,
                    > + ::core::marker::Send + 'a,
                >,
            >,
            fn(&__K2) -> bool,
            fn(
                &__S,
                &__S::Kind,
                &kf::controller::Context<__S::Kind>,
            ) -> anyhow::Result<__K3>,
            fn(&__S, &__S::Kind) -> bool,
            fn(&__S, &__S::Kind) -> bool,
        ) -> kf::dependents::Dependents<__S::Kind, __S>,
        kinds: ::core::marker::PhantomData<fn() -> (__K0, __K1, __K2, __K3)>,
    }
    fn __controller<
        __S: kf::controller::ControllerSpec,
        __K0: kf::controller::Kind,
        __K1: kf::controller::Kind,
        __K2: kf::controller::Kind,
        __K3: kf::controller::Kind,
    >(wiring: &kf::controller::Wiring) -> kf::controller::Controller<__S::Kind> {
        let client = wiring.cache().client();
        let namespaces = &wiring.namespaces;
        kf::controller::Controller::new(
                <__S as kf::controller::ControllerSpec>::NAME,
                wiring,
                kf::controller::apis_for::<__S::Kind>(&client, namespaces),
                wiring.informer_defaults.clone(),
            )
            .owns_metadata(
                kf::controller::apis_for::<__K0>(&client, namespaces),
                kf::controller::Owns::metadata(),
            )
            .owns_full(
                kf::controller::apis_for::<__K1>(&client, namespaces),
                kf::controller::Owns::full(),
            )
            .owns_full(
                kf::controller::apis_for::<__K2>(&client, namespaces),
                kf::controller::Owns::full(),
            )
            .owns_full(
                kf::controller::apis_for::<__K3>(&client, namespaces),
                kf::controller::Owns::full(),
            )
            .config(
                kf::controller::ControllerConfig::default()
                    .finalizer("db.example.com/volumes"),
            )
    }
    fn __rbac<
        __S: kf::controller::ControllerSpec,
        __K0: kf::controller::Kind,
        __K1: kf::controller::Kind,
        __K2: kf::controller::Kind,
        __K3: kf::controller::Kind,
    >() -> kf::rbac::Rules {
        kf::rbac::Rules::new()
            .primary::<__S::Kind>(true)
            .owned::<__K0>()
            .owned::<__K1>()
            .owned::<__K2>()
            .owned::<__K3>()
            .events()
            .leases()
    }
    fn __dependent_statefulset<'a>(
        controller: &'a DatabaseController,
        obj: &'a Database,
        ctx: &'a kf::controller::Context<Database>,
    ) -> ::core::pin::Pin<
        ::std::boxed::Box<
            dyn ::core::future::Future<
                Output = Result<StatefulSet, BoxError>,
            > + ::core::marker::Send + 'a,
        >,
    > {
        ::std::boxed::Box::pin(<DatabaseController>::statefulset(controller, obj, ctx))
    }
    fn __dependents<
        __S: kf::controller::ControllerSpec,
        __K0: kf::controller::Kind,
        __K1: kf::controller::Kind,
        __K2: kf::controller::Kind,
        __K3: kf::controller::Kind,
    >(
        __desired0: fn(&__S, &__S::Kind, &kf::controller::Context<__S::Kind>) -> __K1,
        __desired1: fn(&__S, &__S::Kind, &kf::controller::Context<__S::Kind>) -> __K0,
        __r1: fn(&__K0) -> bool,
        __desired2: for<'a> fn(
            &'a __S,
            &'a __S::Kind,
            &'a kf::controller::Context<__S::Kind>,
        ) -> ::core::pin::Pin<
            ::std::boxed::Box<
                dyn ::core::future::Future<
                    Output = Result<__K2, BoxError>,
                > + ::core::marker::Send + 'a,
            >,
        >,
        __r2: fn(&__K2) -> bool,
        __desired3: fn(
            &__S,
            &__S::Kind,
            &kf::controller::Context<__S::Kind>,
        ) -> anyhow::Result<__K3>,
        __w3: fn(&__S, &__S::Kind) -> bool,
        __p3: fn(&__S, &__S::Kind) -> bool,
    ) -> kf::dependents::Dependents<__S::Kind, __S>
    where
        __K1: kf::views::Writable,
        __K0: kf::views::Writable,
        __K2: kf::views::Writable,
        __K3: kf::views::Writable,
    {
        kf::dependents::Dependents::<__S::Kind, __S>::new()
            .with(
                kf::dependents::Dependent::<
                    __S::Kind,
                    __S,
                    __K1,
                >::new("password", __desired0)
                    .create_only(),
            )
            .with(
                kf::dependents::Dependent::<
                    __S::Kind,
                    __S,
                    __K0,
                >::new("service", __desired1)
                    .ready(__r1),
            )
            .with(
                kf::dependents::Dependent::<
                    __S::Kind,
                    __S,
                    __K2,
                >::new_async("statefulset", __desired2)
                    .ready(__r2)
                    .depends_on(&["password", "service"]),
            )
            .with(
                kf::dependents::Dependent::<
                    __S::Kind,
                    __S,
                    __K3,
                >::new("backup", __desired3)
                    .when(__w3)
                    .precondition(__p3),
            )
            .__ordered()
    }
    const fn __wiring<
        __S: kf::controller::ControllerSpec,
        __K0: __IsChild<__M0>,
        __M0,
        __K1: __IsChild<__M1>,
        __M1,
        __K2: __IsChild<__M2>,
        __M2,
        __K3: __IsChild<__M3>,
        __M3,
    >() -> __Wiring<__S, __K0, __K1, __K2, __K3> {
        __Wiring {
            controller: __controller::<__S, __K0, __K1, __K2, __K3>,
            rbac: __rbac::<__S, __K0, __K1, __K2, __K3>,
            dependents: __dependents::<__S, __K0, __K1, __K2, __K3>,
            kinds: ::core::marker::PhantomData,
        }
    }
    const __WIRING: __Wiring<
        DatabaseController,
        Service,
        Secret,
        StatefulSet,
        CronJob,
    > = __wiring::<
        DatabaseController,
        Service,
        _,
        Secret,
        _,
        StatefulSet,
        _,
        CronJob,
        _,
    >();
    #[automatically_derived]
    impl kf::controller::ControllerSpec for DatabaseController {
        type Kind = Database;
        const NAME: &'static str = "database";
        const FINALIZER: ::core::option::Option<&'static str> = ::core::option::Option::Some(
            "db.example.com/volumes",
        );
        fn controller(
            wiring: &kf::controller::Wiring,
        ) -> kf::controller::Controller<Self::Kind> {
            (__WIRING.controller)(wiring)
        }
        fn rbac() -> kf::rbac::Rules {
            (__WIRING.rbac)()
        }
    }
};
kf::__private::inventory::submit! {
    kf::rbac::ControllerRegistration { name : "database", rules : < DatabaseController as
    kf::controller::ControllerSpec > ::rbac, }
}
