impl Audit {
    async fn add(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
    async fn update(
        &self,
        old: Arc<WebApp>,
        new: Arc<WebApp>,
        ctx: &WatchContext,
    ) -> Result<(), Error> {
        Ok(())
    }
    async fn delete(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
    async fn sync(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
}
#[automatically_derived]
impl kf::watcher::Watcher<WebApp> for Audit {
    type Error = Error;
    fn add(
        &self,
        obj: ::std::sync::Arc<WebApp>,
        ctx: &kf::watcher::WatchContext,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<(), Self::Error>,
    > + ::core::marker::Send {
        <Audit>::add(self, obj, ctx)
    }
    fn update(
        &self,
        old: ::std::sync::Arc<WebApp>,
        new: ::std::sync::Arc<WebApp>,
        ctx: &kf::watcher::WatchContext,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<(), Self::Error>,
    > + ::core::marker::Send {
        <Audit>::update(self, old, new, ctx)
    }
    fn delete(
        &self,
        obj: ::std::sync::Arc<WebApp>,
        ctx: &kf::watcher::WatchContext,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<(), Self::Error>,
    > + ::core::marker::Send {
        <Audit>::delete(self, obj, ctx)
    }
    fn sync(
        &self,
        obj: ::std::sync::Arc<WebApp>,
        ctx: &kf::watcher::WatchContext,
    ) -> impl ::core::future::Future<
        Output = ::core::result::Result<(), Self::Error>,
    > + ::core::marker::Send {
        <Audit>::sync(self, obj, ctx)
    }
}
#[automatically_derived]
impl kf::watcher::WatcherSpec for Audit {
    type Kind = WebApp;
    const NAME: &'static str = "audit";
    fn watcher(
        wiring: &kf::controller::Wiring,
    ) -> kf::watcher::WatcherController<Self::Kind> {
        kf::watcher::WatcherController::new(
                <Self as kf::watcher::WatcherSpec>::NAME,
                wiring,
                kf::controller::apis_for::<
                    Self::Kind,
                >(&wiring.cache().client(), &wiring.namespaces),
            )
            .workers(16)
            .event_timeout(::core::time::Duration::from_millis(90000))
            .opinionated("apps.example.com/audit")
            .retry(
                kf::retry::ExponentialRetry::new(
                    ::core::time::Duration::from_millis(1000),
                    ::core::time::Duration::from_millis(300000),
                    10,
                ),
            )
            .dequeue(kf::retry::DequeueSameAction)
    }
    fn rbac() -> kf::rbac::Rules {
        kf::rbac::Rules::new().primary::<Self::Kind>(true).events().leases()
    }
}
kf::__private::inventory::submit! {
    kf::rbac::ControllerRegistration { name : "audit", rules : < Audit as
    kf::watcher::WatcherSpec > ::rbac, }
}
