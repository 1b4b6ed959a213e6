//! OTLP/gRPC: tonic's `TraceService`, taking spans in as `POST
//! /v1/traces` does.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::{Request, Response, Status};

use crate::decode::spans_of;
use crate::Collector;

/// The collector as a gRPC `TraceService`.
pub(crate) struct Grpc(pub(crate) Collector);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        Ok(Response::new(
            self.0.take_in(spans_of(request.into_inner())),
        ))
    }
}
