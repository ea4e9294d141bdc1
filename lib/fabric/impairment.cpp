// The byte-vector instance of the model; the code is in impairment_impl.hpp.
#include "fabric/impairment.hpp"

#include "fabric/impairment_impl.hpp"

namespace metaroce::fabric {

template class BasicImpairment<ByteFrameOps>;

}  // namespace metaroce::fabric
